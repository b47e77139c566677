"""What an operator who installs the collection (not the lab) meets: the dependencies to install, where the reports
go when a playbook runs by its FQCN from the installed collection, and the phase tags to run a deployment by parts.
The install itself (built tarball, empty collections path, every playbook by FQCN) is tests/bin/build-check."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
REPORT_ROLES = ("gpu_preflight", "audit", "benchmark")


def _ansible(args, cwd, **env):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0", **env)
    proc = subprocess.run([str(BIN / args[0])] + args[1:], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_requirements_file_is_galaxys_dependencies():
    """requirements.yml (what an operator installs with ansible-galaxy) names galaxy.yml's dependencies, same versions."""
    wanted = yaml.safe_load((ROOT / "galaxy.yml").read_text(encoding="utf-8"))["dependencies"]
    listed = yaml.safe_load((ROOT / "requirements.yml").read_text(encoding="utf-8"))["collections"]
    assert {c["name"]: c["version"] for c in listed} == wanted


@pytest.fixture(scope="module")
def report_dirs(tmp_path_factory):
    """Each role's report directory default as a play sees it: the playbook in one folder (as when it runs by FQCN
    from the installed collection), the inventory in a second, the shell in a third."""
    tmp = tmp_path_factory.mktemp("report-dir")
    for d in ("play", "inventory", "shell"):
        (tmp / d).mkdir()
    imports = [{"ansible.builtin.import_role": {"name": "llmops.sglang." + r}, "when": False} for r in REPORT_ROLES]
    show = {"ansible.builtin.debug": {"msg": "DIRS={{ [%s] | to_json }}" % ", ".join(r + "_report_dir" for r in REPORT_ROLES)}}
    play = [{"hosts": "all", "gather_facts": False, "tasks": imports + [show]}]
    (tmp / "play" / "p.yml").write_text(yaml.safe_dump(play), encoding="utf-8")
    (tmp / "inventory" / "hosts.yml").write_text("all:\n  hosts:\n    h1:\n      ansible_connection: local\n", encoding="utf-8")

    def dirs(inventory):
        inventory = inventory or str(tmp / "inventory" / "hosts.yml")
        out = _ansible(["ansible-playbook", "-i", inventory, str(tmp / "play" / "p.yml")], tmp / "shell",
                       PWD=str(tmp / "shell"), ANSIBLE_CONNECTION="local")
        return tmp, json.loads(re.search(r'"DIRS=(.*)"', out).group(1).replace('\\"', '"'))
    return dirs


def test_reports_go_beside_the_inventory(report_dirs):
    tmp, dirs = report_dirs(None)
    assert dirs == [str(tmp / "inventory" / "reports")] * len(REPORT_ROLES)


def test_reports_of_an_inline_host_list_go_to_the_current_directory(report_dirs):
    tmp, dirs = report_dirs("h1,")
    assert dirs == [str(tmp / "shell" / "reports")] * len(REPORT_ROLES)
