"""The lab itself: 8 real-systemd hosts over SSH, an idempotent play, and a destroy that leaves nothing.

Touches only its own hosts (itest1..8, lab indexes 1..8), so it runs beside molecule scenarios and the other
integration tests; the lab's shared bridge and nftables table must go with the last host when no other host is left."""

import json
import os
import re
import subprocess
import time

import fleet
from fleet import ROOT, lab

SUBNET = os.environ.get("LLMOPS_LAB_SUBNET", "10.78.0")
NETNS_PREFIX = os.environ.get("LLMOPS_LAB_NETNS_PREFIX", "lab-")
VETH_PREFIX = os.environ.get("LLMOPS_LAB_VETH_PREFIX", "lv")
BRIDGE = os.environ.get("LLMOPS_LAB_BRIDGE", "llmbr0")
# `lab up-many 8` boots itest1..8 at indexes 1..8, itest9 is booted alone at 9: none of them a molecule scenario's or another
# integration test's (tests/unit/test_lab_indexes.py).
LAB_INDEXES = (1, 2, 3, 4, 5, 6, 7, 8, 9)
NAMES = fleet.host_names("itest", 8)

PLAY = """
- name: Trivial play over SSH
  hosts: all
  gather_facts: false
  tasks:
    - name: Write a file
      ansible.builtin.copy:
        dest: /etc/lab-probe
        content: "{{ inventory_hostname }}\\n"
        mode: "0644"
    - name: Read systemd's state
      ansible.builtin.command: systemctl is-system-running
      register: state
      changed_when: false
      failed_when: state.stdout not in ['running', 'degraded']
    - name: Reach every other host over the bridge
      ansible.builtin.command:
        argv: "{{ ['python3', '-c', probe] + groups.all | map('extract', hostvars, 'ansible_host') | list }}"
      vars:
        probe: "import socket, sys; [socket.create_connection((h, 22), 3).close() for h in sys.argv[1:]]"
      changed_when: false
"""


def test_eight_hosts_idempotent_play_and_clean_destroy(tmp_path, ansible_env):
    fleet.down(NAMES)
    hosts = []
    try:
        up = lab("up-many", "8", "itest")
        hosts = [json.loads(line) for line in up.stdout.splitlines() if line.startswith("{")]
        assert sorted(h["name"] for h in hosts) == sorted(NAMES)
        assert all(h["state"] in ("running", "degraded") for h in hosts)
        inventory = tmp_path / "inventory.yml"
        lab("inventory", str(inventory), "lab", *NAMES)
        play = tmp_path / "play.yml"
        play.write_text(PLAY)
        cmd = [str(ROOT / ".venv" / "bin" / "ansible-playbook"),
               "-i", str(inventory), str(play)]
        first = subprocess.run(cmd, capture_output=True, text=True, env=ansible_env, timeout=600, check=False)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
        first_recap = fleet.parse_recap(first.stdout)
        assert len(first_recap) == 8 and all(r["changed"] == 1 and r["failed"] == 0 for r in first_recap.values()), first_recap
        second = subprocess.run(cmd, capture_output=True, text=True, env=ansible_env, timeout=600, check=False)
        assert second.returncode == 0, second.stdout[-3000:]
        second_recap = fleet.parse_recap(second.stdout)
        assert len(second_recap) == 8 and all(r["changed"] == 0 and r["failed"] == 0 for r in second_recap.values()), second_recap
        # The transport really is SSH into the host's own network namespace.
        who = lab("ssh", "itest3", "hostname; ip -4 -o addr show eth0")
        assert who.stdout.startswith("itest3") and f"{SUBNET}.13/24" in who.stdout
    finally:
        fleet.down(NAMES)
    left = lab("leftovers").stdout
    veths = re.compile(r"^veth %s(%s)$" % (re.escape(VETH_PREFIX), "|".join(str(h["index"]) for h in hosts)))
    assert [line for line in left.splitlines() if "itest" in line or veths.match(line)] == []
    # The bridge and the nftables table are shared: they go with the last host attached, of any checkout.
    attached = subprocess.run(["ip", "-o", "link", "show", "master", BRIDGE], capture_output=True, text=True, check=False).stdout
    if not attached.strip():
        assert left.strip() == "", "no lab host is left, so the shared bridge and nftables table must be gone: " + left
    nspawn = subprocess.run(["pgrep", "-af", "systemd-nspawn"], capture_output=True, text=True, check=False).stdout
    assert "/.lab/run/itest" not in nspawn, "systemd-nspawn still running: " + nspawn
    with open("/proc/mounts", encoding="utf-8") as f:
        mounts = f.read()
    assert "/.lab/run/itest" not in mounts
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert f"{NETNS_PREFIX}itest" not in netns


def _pgrep(pattern):
    return subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True, check=False).stdout


def test_a_host_that_will_not_power_off_is_killed_with_everything_in_it():
    """A unit that ignores SIGTERM holds the orderly poweroff; `lab down` then kills the host after 10 s, and no process
    of it may survive (killing only systemd-nspawn had left the container's init and its services running)."""
    name = "itest9"
    fleet.down([name])
    try:
        lab("up", name, str(LAB_INDEXES[-1]))
        # --wait would wait for the unit to end: systemd-run returns once it forked, before the child ran the shell
        lab("ssh", name, "systemd-run --unit hang -p TimeoutStopSec=300 sh -c 'trap \"\" TERM; exec sleep 3579'")
        deadline = time.monotonic() + 30
        while "sleep 3579" not in _pgrep("sleep 3579") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "sleep 3579" in _pgrep("sleep 3579")
        down = lab("down", name)
        assert "not off after 10 s, forcing" in down.stderr + down.stdout
    finally:
        fleet.down([name])
    left = _pgrep("sleep 3579")
    assert left == "", "processes of the killed host still run: " + left
    assert name not in lab("leftovers").stdout
