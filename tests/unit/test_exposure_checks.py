# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The roles refuse to expose a model without an API key, and keep secrets out of command lines and unit files.

The roles' own check tasks run with ansible-playbook on localhost (they only read variables): the router and the
server refuse a non-loopback bind without a key in the same words, unless a waiver gives the reason; the server
refuses extra arguments that set the key (abbreviated too), keys no Bearer header can carry, and environment variables
that would set the role's own secrets; the router refuses its key in extra arguments in every spelling its parser takes.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: llmops.sglang.{role}
        tasks_from: {tasks}
"""


def run_checks(tmp_path, role, tasks, extra):
    (tmp_path / "play.yml").write_text(PLAY.format(role=role, tasks=tasks))
    (tmp_path / "vars.json").write_text(json.dumps(extra))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0", ANSIBLE_STDOUT_CALLBACK="default")
    playbook = pathlib.Path(sys.executable).parent / "ansible-playbook"
    proc = subprocess.run([str(playbook), "-e", "@" + str(tmp_path / "vars.json"), str(tmp_path / "play.yml")], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300, check=False, text=True)
    return proc.returncode, proc.stdout


ROUTER = {"router_worker_urls_extra": ["http://10.0.0.11:30000"]}
NO_KEY_WORDS = ["(reachable from other machines)", "anyone on the network", "bind to 127.0.0.1", "no_api_key_waiver"]


@pytest.mark.parametrize("extra, refused", [
    ({"router_host": "0.0.0.0", "router_api_key": ""}, True),
    ({"router_host": "0.0.0.0", "sglang_server_api_key": None}, True),  # the default follows the server's key
    ({"router_host": "10.0.0.20", "router_api_key": "lab-router-key-6f1d2c"}, False),
    ({"router_host": "127.0.0.1", "router_api_key": ""}, False),
    ({"router_host": "0.0.0.0", "router_api_key": "", "router_no_api_key_waiver": "closed lab network"}, False),
])
def test_router_refuses_a_keyless_network_bind(tmp_path, extra, refused):
    rc, out = run_checks(tmp_path, "router", "checks", dict(ROUTER, **extra))
    if refused:
        assert rc != 0 and "router_host is 0.0.0.0" in out and "router_api_key" in out, out
        assert [w for w in NO_KEY_WORDS if w not in out] == [], out
    else:
        assert rc == 0, out


def test_server_refuses_the_same_way(tmp_path):
    rc, out = run_checks(tmp_path, "sglang_server", "validate", {"sglang_server_host": "0.0.0.0"})
    assert rc != 0 and "sglang_server_host is 0.0.0.0" in out and "sglang_server_api_key" in out, out
    assert [w for w in NO_KEY_WORDS if w not in out] == [], out


@pytest.mark.parametrize("args", [["--api-key", "x"], ["--api-k", "x"], ["--admin-api=x"], ["--ho", "0.0.0.0"]])
def test_server_extra_args_cannot_set_a_managed_flag_abbreviated(tmp_path, args):
    rc, out = run_checks(tmp_path, "sglang_server", "validate", {"sglang_server_extra_args": args})
    assert rc != 0 and "sglang_server_extra_args sets " + args[0].split("=")[0] in out, out
    assert "use the role's variables for these" in out, out


@pytest.mark.parametrize("name, setting", [("HF_TOKEN", "sglang_server_hf_token"), ("SGLANG_API_KEY", "sglang_server_api_key")])
def test_server_environment_does_not_set_the_roles_own_secrets(tmp_path, name, setting):
    # other secret-named variables go to the root-only EnvironmentFile (plugin_utils/test_sglang_server_plan.py)
    rc, out = run_checks(tmp_path, "sglang_server", "validate", {"sglang_server_environment": {name: "v", "HF_HUB_OFFLINE": "1"}})
    assert rc != 0 and "must not set the variables the role writes from its own settings (%s (set %s))" % (name, setting) in out, out


def test_server_refuses_a_key_with_a_tab(tmp_path):
    rc, out = run_checks(tmp_path, "sglang_server", "validate", {"sglang_server_api_key": "sk-lab\tkey-1"})
    assert rc != 0 and "sglang_server_api_key must be printable ASCII without spaces" in out and "sk-lab" not in out, out


@pytest.mark.parametrize("args", [["--ap=sk-lab-r1"], ["--api-k", "sk-lab-r1"]])
def test_router_extra_args_cannot_set_the_key_abbreviated(tmp_path, args):
    rc, out = run_checks(tmp_path, "router", "checks", dict(ROUTER, router_extra_args=args))
    assert rc != 0 and "router_extra_args sets %s, a secret flag" % args[0].split("=")[0] in out and "sk-lab-r1" not in out, out
