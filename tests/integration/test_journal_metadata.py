# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""log_audit and sglang_service_stop on a real journald (a lab host): forged journal entries change nothing.

A unit (tests/lab/journal_writer.py) prints a real SGLang start (tests/fixtures/sglang-logs), then lines longer than
journald's LineMax whose rest, an entry of its own, is an SGLang startup record naming another checkpoint, a bf16
pool, a token budget, the FP8 warning and the ready line; a child ignores SIGTERM. User nobody sends the same
records with ``logger --journald`` (with the invocation's INVOCATION_ID=, UNIT=, SYSLOG_IDENTIFIER=) and
``systemd-cat``, and a "Killing process 1 (sshd)" line as systemd would write it. The facts and findings equal
those of the real log alone, and the stop report names the one child systemd killed. Reading the same journal as
text (``-o cat``, the collection's reading before) takes the forged records: the test would catch a return to it.

Boots one lab host (journal1, index 174) and tears it down.
"""

from __future__ import annotations

import json
import re
import subprocess
import time

from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import audit_bytes

import fleet

# A lab index no molecule scenario or other integration test boots (tests/unit/test_lab_indexes.py).
LAB_INDEXES = (174,)
HOST, INDEX = "journal1", LAB_INDEXES[0]
UNIT = "jm-sglang.service"
LOG = fleet.ROOT / "tests" / "fixtures" / "sglang-logs" / "001-qwq32b-tp4-l4-ready-2025-03.log"
ANSIBLE = fleet.ROOT / ".venv" / "bin" / "ansible"
UNIT_TEXT = """[Unit]
Description=SGLang-shaped output under attack
[Service]
ExecStart=/usr/bin/python3 /opt/jm/journal_writer.py /opt/jm/real.log /opt/jm/forged.log
TimeoutStopSec=2
"""
FORGE = """#!/bin/sh
# run as user nobody: what any local user can send to journald
inv=$1
while IFS= read -r line; do
  printf 'MESSAGE=%s\\nINVOCATION_ID=%s\\nUNIT=jm-sglang.service\\nSYSLOG_IDENTIFIER=python3\\n' "$line" "$inv" | logger --journald
done < /opt/jm/forged.log
printf 'MESSAGE=jm-sglang.service: Killing process 1 (sshd) with signal SIGKILL.\\nINVOCATION_ID=%s\\nUNIT=jm-sglang.service\\n%s\\n%s\\n' \\
  "$inv" "SYSLOG_IDENTIFIER=systemd" "MESSAGE_ID=39f53479d3a045ac8e11786248231fbf" | logger --journald
systemd-cat -t python3 < /opt/jm/forged.log
logger -t python3 < /opt/jm/forged.log
"""


def forged_records(real):
    """SGLang's own startup records, changed as an attacker wants them: another checkpoint, bf16, a large budget."""
    dump = next(line for line in real.splitlines(True) if b"server_args=ServerArgs(" in line)
    return [dump.replace(b"/home/model/Qwen/QwQ-32B", b"/models/decoy").replace(b"kv_cache_dtype='auto'", b"kv_cache_dtype='bf16'"),
            b"[2025-03-08 12:30:01 TP0] KV Cache is allocated. #tokens: 1000000, K size: 10.00 GB, V size: 10.00 GB\n",
            b"[2025-03-08 12:30:01 TP0] max_total_num_tokens=1000000, chunked_prefill_size=2048, max_prefill_tokens=16384, "
            b"max_running_requests=2049, context_len=131072\n",
            b"[2025-03-08 12:30:02 TP0] Using FP8 KV cache but no scaling factors provided. Defaulting to scaling factors of 1.0.\n",
            b"[2025-03-08 12:30:03] The server is fired up and ready to roll!\n"]


def ssh_bytes(cmd, timeout=120):
    # the journal holds bytes that are not UTF-8 (the writer prints Latin-1)
    return subprocess.run([str(fleet.LAB), "ssh", HOST, cmd], capture_output=True, check=True, timeout=timeout).stdout


def ssh(cmd, timeout=120):
    return ssh_bytes(cmd, timeout).decode("utf-8", "replace")


def module(inventory, name, args):
    out = subprocess.run([str(ANSIBLE), HOST, "-i", str(inventory), "-o", "-m", "llmops.sglang." + name, "-a", json.dumps(args)],
                         env=fleet.ansible_env(1, True), cwd=str(fleet.ROOT), capture_output=True, text=True, timeout=300, check=False)
    line = next((x for x in out.stdout.splitlines() if x.startswith(HOST + " | ")), None)
    assert line is not None, out.stdout + out.stderr
    return json.loads(line.split(" => ", 1)[1])


def test_forged_entries_change_neither_facts_nor_stop_report(tmp_path):
    real = LOG.read_bytes()
    forged = forged_records(real)
    answer = audit_bytes(real)
    assert answer["facts"]["model_path"] == "/home/model/Qwen/QwQ-32B" and answer["facts"]["kv_cache_dtype_configured"] == "auto"
    fleet.up([HOST], INDEX, profile=None)
    try:
        root = fleet.LAB_DIR / "run" / HOST / "root"
        (root / "opt" / "jm").mkdir(parents=True)
        (root / "opt" / "jm" / "journal_writer.py").write_bytes((fleet.ROOT / "tests" / "lab" / "journal_writer.py").read_bytes())
        (root / "opt" / "jm" / "real.log").write_bytes(real)
        (root / "opt" / "jm" / "forged.log").write_bytes(b"".join(forged))
        (root / "opt" / "jm" / "forge.sh").write_text(FORGE)
        (root / "etc" / "systemd" / "system" / UNIT).write_text(UNIT_TEXT)
        ssh("chmod 755 /opt/jm /opt/jm/forge.sh && chmod 644 /opt/jm/*.log && systemctl daemon-reload && systemctl start " + UNIT)
        deadline = time.monotonic() + 60
        while "writer done" not in ssh("journalctl -u %s -o cat --no-pager" % UNIT):
            assert time.monotonic() < deadline, "the writer did not finish"
            time.sleep(0.5)
        inv = ssh("systemctl show -p InvocationID --value " + UNIT).strip()
        assert re.match(r"^[0-9a-f]{32}$", inv), inv
        ssh("runuser -u nobody -- /opt/jm/forge.sh " + inv)
        # journald took the forged entries with the invocation's INVOCATION_ID (what the stop report used to match)
        assert "Killing process 1 (sshd)" in ssh("journalctl INVOCATION_ID=%s -o cat --no-pager" % inv)
        inventory = fleet.write_inventory(tmp_path / "inventory.json", [HOST])

        audit = module(inventory, "log_audit", {"unit": UNIT})
        assert not audit.get("failed"), audit
        assert audit["source"] == {"unit": UNIT, "invocation": "current", "invocation_id": inv}
        assert audit["facts"] == answer["facts"]
        assert audit["findings"] == answer["findings"] and audit["failed_rules"] == answer["failed_rules"] == []
        stats = audit["stats"]["journal"]
        # each forged record is the rest of a line journald cut, so is the rest after the NUL
        assert stats["continuations"] == len(forged) + 1 and stats["mismatched"] == {"_SYSTEMD_INVOCATION_ID": 0, "_SYSTEMD_UNIT": 0,
                                                                                     "_TRANSPORT": 0}
        # the log's lines (journald keeps no empty line), 6 shapes, the cut heads, the child's line and "writer done"
        assert stats["kept"] == len([line for line in real.split(b"\n") if line]) + 6 + len(forged) + 2

        # read as text, the same journal shows the forged checkpoint and pool as records of their own: only the startup
        # window keeps them from being facts there; read with metadata they are no records at all
        text = ssh_bytes("journalctl _SYSTEMD_INVOCATION_ID=%s -o cat --no-pager" % inv)
        as_text = audit_bytes(text)
        assert as_text["facts"] == answer["facts"]
        late = [f for f in as_text["findings"] if f["rule"] == "startup_record_after_ready"]
        assert late and "startup_record_after_ready" not in [f["rule"] for f in audit["findings"]]

        # a running unit's poll reads the same
        ready = module(inventory, "sglang_wait_ready", {"unit": UNIT, "url": "http://127.0.0.1:9/health_generate", "budget": 3600,
                                                        "timeout": 1})
        assert ready["log"]["max_total_num_tokens"] == answer["facts"]["max_total_num_tokens"] and ready["log"]["ready_line"] is True
        assert ready["log"]["journal"]["continuations"] == len(forged) + 1

        child = int(re.search(r"stubborn child (\d+)", ssh("journalctl -u %s -o cat --no-pager" % UNIT)).group(1))
        stop = module(inventory, "sglang_service_stop", {"unit": UNIT})
        assert [p["pid"] for p in stop["killed"]] == [child], stop
        assert stop["survivors"] == [] and stop["timed_out_state"] == "final-sigterm"
    finally:
        fleet.down([HOST])
    assert '"name":"%s"' % HOST not in fleet.lab("list").stdout
