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
# one ansible-playbook run for every case of this file (each start costs seconds of CPU): one play per case, each on
# its own inventory host (no fact carries over), the role's tasks in a block whose rescue marks the case refused
PLAY = """
- name: case {n}
  hosts: case{n}
  gather_facts: false
  vars: {extra}
  tasks:
    - block:
        - ansible.builtin.include_role:
            name: llmops.sglang.{role}
            tasks_from: {tasks}
      rescue:
        - ansible.builtin.debug:
            msg: case {n} refused
"""
ROUTER = {"router_worker_urls_extra": ["http://10.0.0.11:30000"]}
NO_KEY_WORDS = ["(reachable from other machines)", "anyone on the network", "bind to 127.0.0.1", "no_api_key_waiver"]
ROUTER_BINDS = [
    ({"router_host": "0.0.0.0", "router_api_key": ""}, True),
    ({"router_host": "0.0.0.0", "sglang_server_api_key": None}, True),  # the default follows the server's key
    ({"router_host": "10.0.0.20", "router_api_key": "lab-router-key-6f1d2c"}, False),
    ({"router_host": "127.0.0.1", "router_api_key": ""}, False),
    ({"router_host": "0.0.0.0", "router_api_key": "", "router_no_api_key_waiver": "closed lab network"}, False),
]
SERVER_MANAGED_ARGS = [["--api-key", "x"], ["--api-k", "x"], ["--admin-api=x"], ["--ho", "0.0.0.0"]]
SERVER_OWN_SECRETS = [("HF_TOKEN", "sglang_server_hf_token"), ("SGLANG_API_KEY", "sglang_server_api_key")]
ROUTER_KEY_ARGS = [["--ap=sk-lab-r1"], ["--api-k", "sk-lab-r1"]]
CASES = ([("router", "checks", dict(ROUTER, **extra)) for extra, dummy in ROUTER_BINDS]
         + [("sglang_server", "validate", {"sglang_server_host": "0.0.0.0"})]
         + [("sglang_server", "validate", {"sglang_server_extra_args": args}) for args in SERVER_MANAGED_ARGS]
         + [("sglang_server", "validate", {"sglang_server_environment": {name: "v", "HF_HUB_OFFLINE": "1"}})
            for name, dummy in SERVER_OWN_SECRETS]
         + [("sglang_server", "validate", {"sglang_server_api_key": "sk-lab\tkey-1"})]
         + [("router", "checks", dict(ROUTER, router_extra_args=args)) for args in ROUTER_KEY_ARGS])


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    """Runs every case's check tasks; gives each case (its play's output, whether its checks failed)."""
    tmp = tmp_path_factory.mktemp("exposure")
    (tmp / "hosts.yml").write_text(json.dumps({"all": {"hosts": {"case%d" % n: {"ansible_connection": "local"}
                                                                 for n in range(len(CASES))}}}))
    (tmp / "play.yml").write_text("".join(PLAY.format(n=n, role=role, tasks=tasks, extra=json.dumps(extra))
                                          for n, (role, tasks, extra) in enumerate(CASES)))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0", ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    playbook = pathlib.Path(sys.executable).parent / "ansible-playbook"
    proc = subprocess.run([str(playbook), "-i", str(tmp / "hosts.yml"), str(tmp / "play.yml")], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600, check=False, text=True)
    plays = proc.stdout.split("\nPLAY [")
    assert proc.returncode == 0 and len(plays) == len(CASES) + 1, proc.stdout
    return {json.dumps(case, sort_keys=True): (out, "case %d refused" % n in out)
            for n, (case, out) in enumerate(zip(CASES, plays[1:]))}


def run_checks(checks, role, tasks, extra):
    """Like a run of the role's check tasks alone: (1 when they failed the play else 0, what the play printed)."""
    out, refused = checks[json.dumps((role, tasks, extra), sort_keys=True)]
    return int(refused), out


@pytest.mark.parametrize("extra, refused", ROUTER_BINDS)
def test_router_refuses_a_keyless_network_bind(checks, extra, refused):
    rc, out = run_checks(checks, "router", "checks", dict(ROUTER, **extra))
    if refused:
        assert rc != 0 and "router_host is 0.0.0.0" in out and "router_api_key" in out, out
        assert [w for w in NO_KEY_WORDS if w not in out] == [], out
    else:
        assert rc == 0, out


def test_server_refuses_the_same_way(checks):
    rc, out = run_checks(checks, "sglang_server", "validate", {"sglang_server_host": "0.0.0.0"})
    assert rc != 0 and "sglang_server_host is 0.0.0.0" in out and "sglang_server_api_key" in out, out
    assert [w for w in NO_KEY_WORDS if w not in out] == [], out


@pytest.mark.parametrize("args", SERVER_MANAGED_ARGS)
def test_server_extra_args_cannot_set_a_managed_flag_abbreviated(checks, args):
    rc, out = run_checks(checks, "sglang_server", "validate", {"sglang_server_extra_args": args})
    assert rc != 0 and "sglang_server_extra_args sets " + args[0].split("=")[0] in out, out
    assert "use the role's variables for these" in out, out


@pytest.mark.parametrize("name, setting", SERVER_OWN_SECRETS)
def test_server_environment_does_not_set_the_roles_own_secrets(checks, name, setting):
    # other secret-named variables go to the root-only EnvironmentFile (plugin_utils/test_sglang_server_plan.py)
    rc, out = run_checks(checks, "sglang_server", "validate", {"sglang_server_environment": {name: "v", "HF_HUB_OFFLINE": "1"}})
    assert rc != 0 and "must not set the variables the role writes from its own settings (%s (set %s))" % (name, setting) in out, out


def test_server_refuses_a_key_with_a_tab(checks):
    rc, out = run_checks(checks, "sglang_server", "validate", {"sglang_server_api_key": "sk-lab\tkey-1"})
    assert rc != 0 and "sglang_server_api_key must be printable ASCII without spaces" in out and "sk-lab" not in out, out


@pytest.mark.parametrize("args", ROUTER_KEY_ARGS)
def test_router_extra_args_cannot_set_the_key_abbreviated(checks, args):
    rc, out = run_checks(checks, "router", "checks", dict(ROUTER, router_extra_args=args))
    assert rc != 0 and "router_extra_args sets %s, a secret flag" % args[0].split("=")[0] in out and "sk-lab-r1" not in out, out
