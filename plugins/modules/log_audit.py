#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: log_audit
short_description: Audit an SGLang server log for KV-cache dtype, startup progress, fatal errors and known warnings
version_added: 0.1.0
description:
  - Reads an SGLang log from a file (O(path)) or from the journal of a systemd unit (O(unit)) and reports what
    the server did (RV(facts)) and which audit rules matched (RV(findings)).
  - For a unit only the current invocation is read by default (its C(InvocationID), see O(invocation)), so
    warnings printed before a restart with fixed flags cannot fail a play, and a warning of the running
    server always shows.
  - The journal is read with each entry's metadata (C(journalctl -o json --output-fields=...)), and only the entries
    the unit's processes wrote to stdout/stderr are audited, judged by fields journald sets itself
    (C(_SYSTEMD_INVOCATION_ID), C(_SYSTEMD_UNIT), C(_TRANSPORT=stdout), C(_PID)). Entries sent with C(logger),
    C(systemd-cat) or C(logger --journald) by any local user, syslog and kernel messages, and fields such as
    C(INVOCATION_ID=), C(SYSLOG_IDENTIFIER=), C(MESSAGE_ID=) or C(UNIT=) decide nothing. The rest of a line that
    journald cut at its C(LineMax) (48 KiB by default; C(_LINE_BREAK=line-max)) or at a NUL byte is a new entry that
    starts with whatever the writer printed there, a client's prompt for instance; it is never read as a record, only
    counted (RV(stats.journal)).
  - The log is streamed in chunks with constant memory; over-long lines keep their head and the rest is
    counted. A line is only parsed when it holds one of the audit's key literals, so a log of many GB of
    decode/prefill/HTTP lines is read at about the speed of C(grep).
  - Understands the line prefixes of real SGLang logs (C([date time(.ms) DPn PPn TPn EPn]), time-only,
    C(LEVEL file.py:N:) tags), outer prefixes of journald, container runtimes, Ray and docker compose, ANSI colour
    codes, tqdm bars with records glued to their end, multi-line and chained tracebacks, truncated files, the
    server_args dump as C(ServerArgs(...)) or dict, and invalid UTF-8.
  - Facts and rules come only from SGLang's own log records, matched at the start of their message. uvicorn's access
    lines and the requests and answers C(--log-requests) echoes hold text chosen by clients; they never give a fact,
    a finding or a fatal cause, so a request such as C(/?server_args=ServerArgs(kv_cache_dtype='fp8_e4m3')) or a prompt
    quoting the FP8 warning changes nothing.
  - Every line the audit keys on is listed, with the SGLang source file that prints it, in
    C(plugins/module_utils/sglang_log/_lines.py); a unit test checks each against the installed SGLang 0.5.23.
  - A file is read up to the size it had when the audit began; the journal is streamed. Memory stays bounded
    (1 MiB chunks, lines cut at 256 KiB).
  - The module never fails because of findings unless O(fail_on_findings=true); it returns RV(failed_rules) for a
    role to assert on.
author:
  - llmops maintainers (@llmops)
extends_documentation_fragment:
  - llmops.sglang.attributes
  - llmops.sglang.attributes.info_module
options:
  path:
    description:
      - Log file to read on the managed host (for example the file a unit writes with C(StandardOutput=append:)).
      - Mutually exclusive with O(unit).
    type: path
  unit:
    description:
      - systemd unit whose journal is read, for example C(sglang.service).
      - Mutually exclusive with O(path).
    type: str
  invocation:
    description:
      - V(current) reads only the unit's current (or last) invocation, found with
        C(systemctl show --property=InvocationID -- UNIT) and read with
        C(journalctl _SYSTEMD_INVOCATION_ID=<id> _SYSTEMD_UNIT=UNIT _TRANSPORT=stdout -o json --all --no-pager).
      - V(all) reads the unit's whole journal (C(journalctl _SYSTEMD_UNIT=UNIT _TRANSPORT=stdout -o json --all --no-pager));
        facts then describe the latest server start in it, findings cover all of it.
      - Only used with O(unit).
    type: str
    choices: [current, all]
    default: current
  since:
    description:
      - Passed to C(journalctl --since), for example C(-1h) or C(2026-11-30 10:00). Only used with O(unit).
      - An entry just after the cut that continues a line cut at C(LineMax) before it is read as a line.
    type: str
  rules:
    description:
      - Rules added to the default rule list, or overriding the fields of a default rule with the same O(rules[].id).
      - A pattern should hold a plain-text run of a few characters; the scanner uses it to skip unrelated lines.
        A pattern without one (for example one starting with C((?i))) makes the audit parse every line.
    type: list
    elements: dict
    suboptions:
      id:
        description: Rule id. An id of a default rule overrides that rule's given fields.
        type: str
        required: true
      severity:
        description: V(error) findings are listed in RV(failed_rules) unless waived. Required for a new rule.
        type: str
        choices: [error, warning, info]
      pattern:
        description: Python regular expression (see O(rules[].scope)). Required for a new rule.
        type: str
      scope:
        description:
          - V(line) searches the pattern anywhere in a log record, prefix included (the default for a new rule).
          - V(message) matches it at the start of the message of one of SGLang's own records, after the
            C([time ranks]) prefix (the default rules that key on SGLang's lines use it).
          - Neither ever matches an access line or a request echoed by C(--log-requests).
        type: str
        choices: [line, message]
      description:
        description: What the finding means.
        type: str
      fix:
        description: What to do about it.
        type: str
  allow:
    description:
      - Waivers. A waived rule is still reported in RV(findings) (with C(waived=true) and the reason) but never
        listed in RV(failed_rules).
    type: list
    elements: dict
    suboptions:
      rule:
        description: Id of the rule to waive.
        type: str
        required: true
      reason:
        description: Why the finding is acceptable. Must not be empty.
        type: str
        required: true
  max_evidence:
    description: Number of matching lines kept as evidence per rule (with their line numbers).
    type: int
    default: 3
  fail_on_findings:
    description: Fail the task when RV(failed_rules) is not empty.
    type: bool
    default: false
notes:
  - Reads only; supports check mode fully.
  - Default rules, see C(plugins/module_utils/sglang_log/_rules.py) - V(fp8_kv_no_scales) and V(fp8_kv_effective)
    (FP8 KV cache, error), V(kv_dtype_set_by_model),
    V(moe_default_kernel_config) (info), V(cuda_out_of_memory), V(not_enough_memory), V(no_kernel_image),
    V(scheduler_exception), V(child_process_failed), V(rank_load_mismatch), V(health_check_failed),
    V(cli_argument_error), V(kv_pool_full), V(weight_not_loaded); and V(startup_record_after_ready) (warning), a startup
    record after the server accepted requests, which is never a fact (see C(docs/audit.md)).
seealso:
  - name: SGLang server arguments
    description: The C(--kv-cache-dtype) option and the other flags the dump shows.
    link: https://docs.sglang.ai/advanced_features/server_arguments.html
"""

EXAMPLES = r"""
- name: Audit the running SGLang service (current invocation only)
  llmops.sglang.log_audit:
    unit: sglang.service
  register: audit

- name: The KV cache must be bf16
  ansible.builtin.assert:
    that:
      - audit.facts.kv_dtype_effective in [none, 'torch.bfloat16']
      - not audit.facts.fp8_scale_warning
      - audit.failed_rules | length == 0
    fail_msg: "{{ audit.findings | selectattr('rule', 'in', audit.failed_rules) | map(attribute='description') | list }}"

- name: Show startup progress while waiting for the server
  llmops.sglang.log_audit:
    unit: sglang.service
  register: progress
  until: progress.facts.phase in ['ready', 'failed']
  retries: 120
  delay: 10

- name: Audit a log file with an extra rule and a waiver
  llmops.sglang.log_audit:
    path: /var/log/sglang/server.log
    rules:
      - id: nccl_warning
        severity: warning
        pattern: 'NCCL WARN '
        description: NCCL printed a warning.
        fix: Check the interconnect.
    allow:
      - rule: moe_default_kernel_config
        reason: flashinfer_cutlass is the MoE runner; the Triton config is unused
    fail_on_findings: true
"""

RETURN = r"""
source:
  description: What was read.
  returned: always
  type: dict
  sample: {"unit": "sglang.service", "invocation": "current", "invocation_id": "5c0a1e5b2f6f4d0c9d1f0c7e3a1b2c3d"}
facts:
  description: What the server did, for the latest server start in the input.
  returned: always
  type: dict
  contains:
    fp8_scale_warning:
      description: C(Using FP8 KV cache but no scaling factors provided) was printed. SGLang 0.5.23 prints it only for an
        explicit C(--kv-cache-dtype fp8_e4m3), never under C(auto).
      type: bool
    kv_cache_dtype_configured:
      description: C(kv_cache_dtype) of the server_args dump; null without a dump or when the dump is cut before it.
      type: str
    server_args_format:
      description: How the server_args dump is written, which tells the SGLang release apart - C(dict) (resolved values,
        SGLang 0.5.19 and newer), C(repr) (C(ServerArgs(...)), the arguments as typed, 0.5.18 and older); null without a dump.
      type: str
      sample: repr
    kv_dtype_effective:
      description: Torch dtype of the KV cache from C(KV Cache is allocated. dtype) (or C(KV Cache VA upper bound. dtype)
        with C(SGLANG_ENABLE_POST_CAPTURE_KV_SIZING=1)), or from C(Using KV cache dtype) of SGLang releases before 0.5.23;
        null otherwise.
      type: str
      sample: torch.float8_e4m3fn
    tp_size:
      description: C(tp_size) from the dump, else from the C(tp_size=N) field of SGLang's C(Context:) line, else null.
      type: int
    model_path:
      description: C(model_path) of the dump, or null.
      type: str
    max_total_num_tokens:
      description: From the scheduler line C(max_total_num_tokens=N, ...) (or a bare C(max_total_num_tokens=N) line).
      type: int
    kv_pools:
      description: One entry per C(KV Cache is allocated) (or C(VA upper bound)) line, labelled pools (C(SWA), C(Full))
        included, with C(rank), C(tokens), C(k_gb), C(v_gb), C(kv_gb), C(dtype).
      type: list
      elements: dict
    mamba_pool:
      description: The first C(Mamba Cache is allocated) line as C(rank), C(max_mamba_cache_size), C(conv_state_gb),
        C(ssm_state_gb), C(intermediate_ssm_state_gb), C(intermediate_conv_window_gb); null when absent.
      type: dict
    ready:
      description: C(The server is fired up and ready to roll!) was printed.
      type: bool
    fatal:
      description: The first fatal error as C(class) (C(none), C(cuda_oom), C(no_kernel_image), C(not_enough_memory) (no
        room for the KV cache after the weights), C(python_exception), C(truncated_traceback), C(port_in_use) (uvicorn
        could not bind the server port) or C(cli_argument_error) (argparse rejected the command line)), C(message) (the
        exception or error line), C(line) and C(rank).
      type: dict
      sample: {"class": "python_exception", "message": "TypeError: cannot unpack non-iterable ForwardMetadata object",
               "line": 151, "rank": "TP7"}
    ranks_seen:
      description: Rank tags (C(TP0), C(DP1 TP1 EP1), ...) of the lines the audit parsed.
      type: list
      elements: str
    phase:
      description: Startup phase reached, one of C(starting), C(loading_weights), C(kv_pool_allocated),
        C(capturing_cuda_graphs), C(warming_up), C(ready), C(failed).
      type: str
    starts:
      description: Number of server_args dumps (server starts) in the input.
      type: int
findings:
  description: One entry per rule that matched.
  returned: always
  type: list
  elements: dict
  contains:
    rule:
      description: Rule id.
      type: str
    severity:
      description: C(error), C(warning) or C(info).
      type: str
    description:
      description: What the finding means.
      type: str
    fix:
      description: What to do about it.
      type: str
    count:
      description: Number of matching records.
      type: int
    per_rank:
      description: Count per rank tag (C(main) for lines without one).
      type: dict
    evidence:
      description: The first O(max_evidence) matching records as C(line) (1-based line number), C(rank) and C(text).
      type: list
      elements: dict
    waived:
      description: The rule is waived by O(allow).
      type: bool
    waiver_reason:
      description: The waiver's reason, or null.
      type: str
failed_rules:
  description: Ids of error-severity rules that matched and are not waived.
  returned: always
  type: list
  elements: str
  sample: [fp8_kv_no_scales, fp8_kv_effective]
stats:
  description: C(bytes) read, C(inspected_lines) parsed, C(truncated_lines) cut at the line-length limit,
    C(dropped_bytes) not parsed because of that limit, C(kv_pools_dropped) beyond the list limit.
  returned: always
  type: dict
  contains:
    journal:
      description:
        - With O(unit) only. C(entries) read from journalctl, C(kept) (the lines audited), C(continuations) (the rest
          of a line journald cut at C(LineMax) or at a NUL, never audited), C(oversized) (JSON lines over 1 MiB,
          skipped), C(malformed), C(no_message), and C(mismatched) (entries left out, per trusted field that differed).
      type: dict
      returned: when O(unit) is given
      sample: {"entries": 5210, "kept": 5204, "continuations": 2, "oversized": 0, "malformed": 0, "no_message": 0,
               "mismatched": {"_SYSTEMD_INVOCATION_ID": 0, "_SYSTEMD_UNIT": 0, "_TRANSPORT": 4}}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.llmops.sglang.plugins.module_utils._redact import redact
from ansible_collections.llmops.sglang.plugins.module_utils._journal import JournalError, unit_output
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import LogAuditError, LogAuditor, audit_journal, audit_path
from ansible_collections.llmops.sglang.plugins.module_utils._systemd import SystemdError, check_unit_name, show


def _clean(items):
    """Drop options the user did not give (suboptions default to None)."""
    return [dict((k, v) for k, v in item.items() if v is not None) for item in items or []]


def _journal_command(module, unit, invocation, since):
    journalctl = module.get_bin_path("journalctl", required=True)
    source = {"unit": unit, "invocation": invocation}
    inv = None
    if invocation == "current":
        try:
            inv = show(unit, ["InvocationID"], module.get_bin_path("systemctl")).get("InvocationID", "")
        except SystemdError as exc:
            module.fail_json(msg=to_native(exc))
        if not inv:
            module.fail_json(msg="unit %s has no invocation id: it has not run since boot or does not exist. "
                                 "Start it first, or use invocation=all to read its whole journal." % unit)
        source["invocation_id"] = inv
    try:
        cmd, require = unit_output(journalctl, unit, inv, since=since)
    except JournalError as exc:
        module.fail_json(msg="systemctl's answer for %s: %s; use invocation=all with this systemd." % (unit, exc))
    return cmd, require, source


def _audit_journal(module, cmd, require, kwargs):
    try:
        rc, err, result = audit_journal(cmd, require, **kwargs)
    except OSError as exc:
        module.fail_json(msg=to_native(exc))
    if rc != 0:
        module.fail_json(msg="%s failed (rc=%d): %s" % (" ".join(cmd), rc, err or "no error output"))
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path"),
            unit=dict(type="str"),
            invocation=dict(type="str", choices=["current", "all"], default="current"),
            since=dict(type="str"),
            rules=dict(type="list", elements="dict", options=dict(
                id=dict(type="str", required=True),
                severity=dict(type="str", choices=["error", "warning", "info"]),
                pattern=dict(type="str"),
                scope=dict(type="str", choices=["line", "message"]),
                description=dict(type="str"),
                fix=dict(type="str"),
            )),
            allow=dict(type="list", elements="dict", options=dict(
                rule=dict(type="str", required=True),
                reason=dict(type="str", required=True),
            )),
            max_evidence=dict(type="int", default=3),
            fail_on_findings=dict(type="bool", default=False),
        ),
        mutually_exclusive=[["path", "unit"]],
        required_one_of=[["path", "unit"]],
        supports_check_mode=True,
    )
    p = module.params
    if p["max_evidence"] < 0:
        module.fail_json(msg="max_evidence must be 0 or more, got %d" % p["max_evidence"])
    kwargs = dict(rules=_clean(p["rules"]), allow=_clean(p["allow"]), max_evidence=p["max_evidence"])
    try:
        # validate rules and waivers before touching the host
        LogAuditor(**kwargs)
        if p["path"]:
            path = p["path"]
            if not os.path.exists(path):
                module.fail_json(msg="log file %s does not exist; point path at the file the service writes, or use unit" % path)
            if os.path.isdir(path):
                module.fail_json(msg="%s is a directory; path must be the log file itself" % path)
            if not os.path.isfile(path):
                module.fail_json(msg="%s is not a regular file (a device, pipe or socket has no end to read to); "
                                     "point path at the log file itself, or use unit" % path)
            source = {"path": path}
            try:
                result = audit_path(path, **kwargs)
            except (IOError, OSError) as exc:
                module.fail_json(msg="cannot read %s: %s" % (path, to_native(exc)))
        else:
            unit = p["unit"]
            try:
                check_unit_name(unit)
            except SystemdError as exc:
                module.fail_json(msg=to_native(exc))
            cmd, require, source = _journal_command(module, unit, p["invocation"], p["since"])
            result = _audit_journal(module, cmd, require, kwargs)
    except LogAuditError as exc:
        module.fail_json(msg=to_native(exc))

    # evidence and the fatal line are log text: requests and SGLang's own dump can carry credentials
    result = redact(result)
    if p["fail_on_findings"] and result["failed_rules"]:
        module.fail_json(msg="log audit failed: %s matched. See findings for evidence and fixes, or waive a rule with allow "
                             "and a reason." % ", ".join(result["failed_rules"]), changed=False, source=source, **result)
    module.exit_json(changed=False, source=source, **result)


if __name__ == "__main__":
    main()
