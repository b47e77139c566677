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


# The phase tags of site.yml: each role's tasks run alone (--tags) or are left out (--skip-tags) by its phase.
PHASES = {"preflight": ["gpu_preflight"], "runtime": ["sglang_runtime"], "kernel": ["sgl_kernel", "fp4_kernels"],
          "server": ["sglang_server"], "guard": ["audit"], "benchmark": ["benchmark"], "router": ["router"]}


def _role_uses(node, inherited=()):
    """(role, tags, tags its tasks get) of every import_role/include_role and play role under node; a block's and a
    play's tags are inherited by what they hold."""
    if isinstance(node, list):
        for item in node:
            yield from _role_uses(item, inherited)
    elif isinstance(node, dict):
        tags = list(inherited) + list(node.get("tags") or [])
        for key in ("ansible.builtin.import_role", "ansible.builtin.include_role"):
            if key in node:
                applied = tags if key.endswith("import_role") else list(inherited) + node[key].get("apply", {}).get("tags", [])
                yield node[key]["name"], tags, applied
        if "role" in node:
            yield node["role"], tags, tags
        for key in ("block", "rescue", "always", "tasks", "roles"):
            if key in node:
                yield from _role_uses(node[key], tags)


def test_every_role_in_site_yml_carries_its_phase_tag():
    uses = list(_role_uses(yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text(encoding="utf-8"))))
    roles = {use[0].rsplit(".", 1)[1] for use in uses}
    by_role = {role: phase for phase, names in PHASES.items() for role in names}
    assert roles == set(by_role)
    for name, tags, inside in uses:
        role = name.rsplit(".", 1)[1]
        phase = "guard" if role == "sglang_server" and by_role[role] not in tags else by_role[role]
        assert phase in tags and phase in inside, "%s in site.yml lacks its phase tag %r (on the task and applied inside)" % (name, phase)


def _listed(playbook, *args):
    out = _ansible(["ansible-playbook", "-i", str(ROOT / "inventories" / "prod"), playbook] + list(args), ROOT)
    return out


def test_list_tags_shows_every_phase():
    out = _listed("playbooks/site.yml", "--list-tags")
    tags = set(t.strip() for line in re.findall(r"TASK TAGS: \[(.*)\]", out) for t in line.split(",") if t.strip())
    assert set(PHASES) <= tags, out


def test_the_preflight_playbook_is_the_preflight_phase_of_site_yml():
    """llmops.sglang.preflight runs the preflight's tasks and nothing else, the ones `site.yml --tags preflight` runs."""
    task = re.compile(r"^\s+(llmops\.sglang\.\w+) : (.*?)\tTAGS: \[(.*)\]$", re.M)
    alone = [m[:2] for m in task.findall(_listed("llmops.sglang.preflight", "--list-tasks"))]
    tagged = [m[:2] for m in task.findall(_listed("playbooks/site.yml", "--list-tasks", "--tags", "preflight"))
              if "preflight" in m[2].split(", ")]
    assert alone and alone == tagged
    assert {task[0] for task in alone} == {"llmops.sglang.gpu_preflight"}


def test_the_example_inventory_sets_every_switch_site_yml_reads():
    """The variables site.yml itself reads with a default (its switches) are set, with their comments, in the example
    inventory; the API key is shown the vault way only."""
    site = (ROOT / "playbooks" / "site.yml").read_text(encoding="utf-8")
    switches = set(re.findall(r"\b(sglang_[a-z_]+) \| default\(", site))
    assert {"sglang_build_kernel", "sglang_run_benchmark", "sglang_serial"} <= switches
    example = ROOT / "inventories" / "prod" / "group_vars" / "sglang_servers" / "main.yml"
    values = yaml.safe_load(example.read_text(encoding="utf-8"))
    assert sorted(switches - set(values)) == []
    text = example.read_text(encoding="utf-8")
    assert "ansible-vault encrypt_string" in text and "# sglang_server_api_key: !vault |" in text
    assert values.get("sglang_server_api_key") is None
