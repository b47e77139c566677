# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to this collection's roles and plugins: runs on the controller only, not an API; it may change in
# any release without notice.
"""What site.yml reports: one host's outcome once its turn is over (``host_report``) and the end-of-play table
(``summary_lines``). Runs on the controller, standard library only."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json

from ansible_collections.llmops.sglang.plugins.module_utils._coerce import truthy

from ansible_collections.llmops.sglang.plugins.plugin_utils._report_text import plain

SUMMARY_ROW = "%-24s %-9s %-8s %-34s %-24s %s"
SUMMARY_HEADER = ("host", "preflight", "kv", "service", "runs", "benchmark")
# Characters of the configuration digest: hosts on one configuration show one value.
DIGEST_CHARS = 10


def _flag(value, default):
    return default if value is None else truthy(value)


def launch_args(record):
    """The launch arguments of the argv record (base64 ``content``, as host_state and slurp read it); [] when there is
    none or it cannot be read."""
    content = (record or {}).get("content")
    if not content:
        return []
    try:
        data = json.loads(base64.b64decode(content))
    except (ValueError, binascii.Error, TypeError):
        return []
    args = data.get("args") if isinstance(data, dict) else None
    return args if isinstance(args, list) else []


def outcome(rolled_back=False, failed=False, guard_passed=True, changed=False):
    """'rolled back', 'failed' (the server role failed or the KV guard did not pass), 'deployed' or 'unchanged'."""
    if _flag(rolled_back, False):
        return "rolled back"
    if _flag(failed, False) or not _flag(guard_passed, True):
        return "failed"
    return "deployed" if _flag(changed, False) else "unchanged"


def host_report(read, state=None):
    """{outcome, state, config, kv_cache_dtype} of one host.

    read: the registered host_state result of the report (``read``: the argv record alone; ``commands.unit``:
    ``systemctl show --property=ActiveState --value``); state: {rolled_back, failed, guard_passed, changed} from the
    roles' facts.
    """
    read = read if isinstance(read, dict) else {}
    args = launch_args(next(iter((read.get("read") or {}).values()), None))
    unit = (read.get("commands") or {}).get("unit") or {}
    active = (unit.get("stdout") or "").strip() if unit.get("rc") == 0 else ""
    kv = args[args.index("--kv-cache-dtype") + 1] if "--kv-cache-dtype" in args[:-1] else "n/a"
    return {
        "outcome": outcome(**(state or {})),
        "state": active or "unknown",
        "config": hashlib.sha1(json.dumps(args).encode("utf-8")).hexdigest()[:DIGEST_CHARS] if args else "none",
        "kv_cache_dtype": kv,
    }


def _service(si):
    if si is None:
        return "n/a"
    text = "ready" if si.get("ready") else "NOT READY"
    if si.get("ready_after") and si.get("restarted"):
        text += " after %ss" % round(si["ready_after"], 1)
    if si.get("restarted"):
        text += ", restarted"
    if (si.get("nnodes") or 1) > 1:
        text += ", node %s/%s" % (si.get("node_rank"), si.get("nnodes"))
    return text


def summary_row(host, hv):
    """One host's line: preflight verdict, KV guard verdict, service state, configuration and benchmark."""
    pre = hv.get("gpu_preflight_result")
    guard = hv.get("audit_guard")
    report = hv.get("sglang_site_report")
    # play output: the cells carry what hosts, servers and logs answered (unit state, verdicts, benchmark line)
    return SUMMARY_ROW % tuple(plain(cell) for cell in (
        host,
        "n/a" if pre is None else ("passed" if pre.get("passed") else
                                   "FAILED:" + ",".join(f.get("rule", "?") for f in pre.get("failed") or [])),
        "n/a" if guard is None else guard.get("verdict", "?"),
        _service(hv.get("sglang_server_info")),
        "n/a" if report is None else "%s (%s)" % (report.get("config"), report.get("outcome")),
        hv.get("benchmark_summary", "n/a"),
    ))


def summary_lines(hosts, hostvars):
    """The end-of-play table: a header and one line per host."""
    return [SUMMARY_ROW % SUMMARY_HEADER] + [summary_row(h, hostvars[h]) for h in hosts]
