#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kv_cache_guard
short_description: Prove from independent signals that an SGLang server's KV cache runs in bf16
version_added: 0.1.0
description:
  - A checkpoint whose quantization metadata says C(kv_cache_quant_algo FP8) (NVIDIA ModelOpt NVFP4 exports
    usually do) makes C(--kv-cache-dtype auto) run an FP8 E4M3 KV cache. When no k/v scales are loaded it runs
    with scale 1.0, and the server may not print any warning. This module gathers the signals that show the
    real KV dtype and fails unless they prove bf16.
  - Each signal gets a verdict (C(bf16), C(fp8), C(other) or C(unknown)) and its evidence.
  - The guard reads the server by the rules of its SGLang release, taken from C(/server_info)'s C(version), else
    from the log's server_args dump (a dict since 0.5.19, a C(ServerArgs) repr before), else 0.5.23 is assumed.
  - C(argv) is the C(--kv-cache-dtype) of the launch command from O(argv) or from the O(unit)'s C(ExecStart).
    Both C(--kv-cache-dtype bf16) and C(--kv-cache-dtype=bf16) are read, and an absent flag means C(auto).
    Without O(argv)/O(unit), the running server's own record of the flag is used. SGLang 0.5.20 and newer keep
    it in C(launch_command) of C(/server_info). For 0.5.16 and older it is the ServerArgs dump in O(log_facts),
    else the top-level C(kv_cache_dtype) of C(/server_info).
  - SGLang 0.5.23 sets C(fp8_e4m3) by itself in some cases (its C(arg_groups) rules).
    C(--attention-backend tokenspeed_mla) does it over any flag, an explicit bf16 included, so C(argv) then
    says fp8 and names the backend. Some architectures (DeepSeek V4, Muse Spark, DeepSeek sparse-attention
    checkpoints on SM100+, MiniMax-M3 NVFP4) do it when the flag is C(auto). C(checkpoint) and the fix name
    the architecture.
  - C(checkpoint) is what the checkpoint served makes C(auto) resolve to. SGLang consults the checkpoint only when the
    server args still say C(auto) after its argument processing. Otherwise this row repeats them and does not count.
  - The checkpoint served is the one the server runs, never one named in its log. It is the C(--model-path) (or
    C(--model)) of the launch command, checked against C(model_path) of C(/server_info) when the server answers
    (the server's alone without a launch command). When they differ, the guard fails with verdict C(mixed) and
    a fix naming both. RV(model) says what was found.
  - C(server) is what the live server's C(/server_info) reports. For SGLang 0.5.17 and newer that is the top-level
    C(kv_cache_dtype), the server args after argument resolution. Without C(/server_info), the same value comes
    from a log dump that log_audit reports as a dict. For 0.5.16 and older it is
    C(internal_states[*].kv_cache_dtype), where each scheduler recorded what C(auto) resolved to.
  - C(auto) in the server signal proves nothing. From 0.5.17 an FP8 KV cache chosen by C(auto) shows nowhere in
    C(/server_info). The signal is C(unknown), with the reason, also when the server cannot be read.
  - C(log_dtype) is the log's effective dtype line, C(KV Cache is allocated. dtype) (or C(Using KV cache dtype)
    of older releases).
  - C(pool_bytes) is the byte arithmetic of the C(KV Cache is allocated) pools. It uses the token count, the K (or KV)
    size, the model's full-attention layers, KV heads per rank at the TP size, and the head dim. About 2 bytes
    per element means bf16 and about 1 means fp8. Speculative-decoding draft pools (one layer) are ignored.
  - C(fp8_warning) is the C(Using FP8 KV cache but no scaling factors provided) warning of the current
    invocation. When present it means fp8. When absent the signal is C(unknown), never bf16. SGLang checks the
    server args, which under C(auto) still say C(auto), so an FP8 KV cache chosen by C(auto) never warns.
  - Counting independent signals. A signal is available when its verdict is not C(unknown). argv and
    checkpoint are one source. The checkpoint counts only when the flag is C(auto), and then argv is
    C(unknown). With an explicit flag, argv counts and the checkpoint row repeats it without counting. So at
    most four independent signals can say bf16 (argv or checkpoint, server, log_dtype, pool_bytes), and five
    can say fp8.
  - The guard passes when every available signal (counted or not) says the same and at least O(min_signals)
    independent signals are available. Otherwise the verdict is C(mixed) (signals disagree), C(fp8) or
    C(other) (the KV cache is not bf16), or C(insufficient). On failure the message is a table
    (signal, verdict, counted, evidence) followed by the fix.
author:
  - llmops maintainers (@llmops)
extends_documentation_fragment:
  - llmops.sglang.attributes
  - llmops.sglang.attributes.info_module
  - llmops.sglang.http_client
  - llmops.sglang.http_client.tls
options:
  argv:
    description:
      - The SGLang launch command as a list of words (for example the unit's rendered C(ExecStart)).
      - Each element is one word, spaces included. Only a whole command line given as the only element, or as the
        script of a shell's C(-c) (C(sh -c '...')), is split into words, by the quoting rules of C(ExecStart=)
        (quotes and backslash escapes, as O(unit) is read; a quote left open splits at whitespace).
      - Mutually exclusive with O(unit).
    type: list
    elements: str
  unit:
    description:
      - A systemd unit whose C(ExecStart) is read from the unit file and its drop-ins (C(systemctl cat -- UNIT)),
        split as systemd splits it (quotes, C escapes, C($VAR) and C(${VAR}), C(%%) and the unit name's
        specifiers, continued lines, prefixes). The first command that looks like an SGLang launch is used.
      - C(systemctl show) prints the loaded command with its words joined by spaces, which loses the word
        boundaries, so it only confirms the file is what systemd loaded. When they differ (a unit changed without
        C(systemctl daemon-reload)), C(argv) is C(unknown) with the reason.
      - While the unit runs, its main process's C(/proc/PID/cmdline) (NUL-separated, exact) must hold the same
        words. It then is the argv judged, with the values systemd gave the unit's variables. When it differs
        (the unit changed after the start), C(argv) is C(unknown) with the reason.
      - A mismatch between the launch flag and the running server's is reported in RV(notes) and usually makes the
        verdict C(mixed).
      - Mutually exclusive with O(argv).
    type: str
  checkpoint:
    description:
      - The checkpoint directory being served (the one with C(config.json)). It decides what C(auto)
        resolves to, and its architecture sizes the C(pool_bytes) arithmetic.
      - By default, the directory the server runs (see RV(model)). When set, it must be that directory, or the guard
        fails naming both. It is needed where the server names no local directory (a hub id such as
        C(Qwen/Qwen3-8B), or a relative path).
    type: path
  gpu:
    description:
      - The GPU the server runs on, for SGLang's architecture and GPU rules when O(checkpoint) decides what C(auto)
        resolves to (see M(llmops.sglang.checkpoint_info) O(llmops.sglang.checkpoint_info#module:gpu)), for example
        the result of M(llmops.sglang.gpu_info). Unset, the checkpoint's answer is for any GPU.
    type: dict
  url:
    description:
      - Base URL of the running SGLang server for the C(server) signal. Set to an empty string to skip it.
    type: str
    default: http://127.0.0.1:30000
  timeout:
    description:
      - Seconds allowed for the C(/server_info) request.
    type: float
    default: 10
  log_facts:
    description:
      - The C(facts) of C(llmops.sglang.log_audit) for the current invocation of the server (keys used are
        C(kv_cache_dtype_configured), C(kv_dtype_effective), C(kv_pools), C(fp8_scale_warning), C(tp_size),
        C(server_args_format) (C(dict) or C(repr)) when present, and C(model_path), which only adds a note when it
        is not the checkpoint judged, as the log never chooses the checkpoint).
      - Facts of an earlier invocation describe an earlier server. Pass only the current one's facts, which is
        what log_audit reports for a log holding several starts.
    type: dict
  log_source:
    description:
      - Where O(log_facts) were read. V(journal) is the unit's journal, whose entries C(log_audit) judges by the fields
        journald sets (the unit's current invocation, its processes' stdout).
      - V(file) is a plain log file (C(log_audit) O(llmops.sglang.log_audit#module:path)), which says none of that
        (which process wrote a line, whether it still runs, which start a line belongs to). Its signals (C(log_dtype),
        C(pool_bytes), C(fp8_warning), a log dump standing in for C(argv) or C(server)) are shown and must agree with
        the others, but together they count as one independent signal, and only when the log describes the server
        answering O(url) now, its C(max_total_num_tokens) (the KV pool, which the KV dtype sizes) and model path equal
        to C(/server_info)'s. Otherwise none of them counts, and RV(notes) says why.
    type: str
    choices: [journal, file]
    default: journal
  tp_size:
    description:
      - Tensor-parallel size for the C(pool_bytes) arithmetic. By default it is taken from O(log_facts), then
        C(/server_info), then the launch command.
    type: int
  expected:
    description:
      - C(bf16) requires a bf16 KV cache.
      - C(fp8_e4m3) also accepts an FP8 KV cache, reported as waived. It needs O(waiver_reason). Signals must
        still agree and be sufficient.
    type: str
    choices: [bf16, fp8_e4m3]
    default: bf16
  waiver_reason:
    description:
      - Why an FP8 KV cache is acceptable. Required when O(expected=fp8_e4m3).
    type: str
  min_signals:
    description:
      - Independent signals that must be available. The maximum is 4 for O(expected=bf16) and 5 for
        O(expected=fp8_e4m3).
    type: int
    default: 3
notes:
  - Only reads; never changes the host or the server.
seealso:
  - module: llmops.sglang.server_info
  - module: llmops.sglang.checkpoint_info
"""

EXAMPLES = r"""
- name: Audit the running server's log
  llmops.sglang.log_audit:
    unit: sglang.service
  register: sglang_log

- name: Refuse anything but a bf16 KV cache (the checkpoint is the unit's --model-path)
  llmops.sglang.kv_cache_guard:
    unit: sglang.service
    url: http://127.0.0.1:30000
    api_key: "{{ sglang_api_key }}"
    log_facts: "{{ sglang_log.facts }}"

- name: Audit a server started by hand that logs to a file (no unit; the launch command from /server_info)
  llmops.sglang.log_audit:
    path: /var/log/sglang/server.log
  register: file_log

- name: Its file's signals count as one, and only when the file describes the server answering now
  llmops.sglang.kv_cache_guard:
    url: http://127.0.0.1:8000
    log_facts: "{{ file_log.facts }}"
    log_source: file

- name: Accept a calibrated FP8 KV cache on a capacity-test host
  llmops.sglang.kv_cache_guard:
    argv: "{{ sglang_argv }}"
    checkpoint: /models/Qwen3.5-397B-A17B-NVFP4
    log_facts: "{{ sglang_log.facts }}"
    expected: fp8_e4m3
    waiver_reason: capacity test with calibrated k/v scales, ticket OPS-1234
"""

RETURN = r"""
verdict:
  description: >-
    C(bf16) or C(fp8) or C(other) when the available signals agree and enough of them count,
    C(mixed) when they disagree, C(insufficient) when too few independent signals are available.
  returned: always
  type: str
  sample: fp8
passed:
  description: Whether the guard passed.
  returned: always
  type: bool
expected:
  description: The O(expected) option.
  returned: always
  type: str
waived:
  description: Whether an FP8 KV cache was accepted through O(waiver_reason).
  returned: always
  type: bool
waiver_reason:
  description: The waiver reason when RV(waived), else null.
  returned: always
  type: str
available_signals:
  description: How many independent signals were available (counted).
  returned: always
  type: int
  sample: 4
min_signals:
  description: The O(min_signals) option.
  returned: always
  type: int
signals:
  description: One entry per signal, in the order argv, checkpoint, server, log_dtype, pool_bytes, fp8_warning.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The signal.
      type: str
    verdict:
      description: C(bf16), C(fp8), C(other) or C(unknown).
      type: str
    available:
      description: Whether the verdict is not C(unknown).
      type: bool
    counted:
      description: Whether it counts as an independent signal.
      type: bool
    evidence:
      description: What was seen, and where.
      type: str
    source:
      description: Where the launch flag was read (argv signal only), else null.
      type: str
  sample:
    - name: checkpoint
      verdict: fp8
      available: true
      counted: true
      evidence: >-
        flag auto (the log's ServerArgs dump kv_cache_dtype='auto'): kv_cache_quant_algo FP8 in hf_quant_config.json
        (quantization.kv_cache_quant_algo) makes auto resolve to fp8_e4m3; no k_scale/v_scale tensors, so scale 1.0
      source: null
table:
  description: The signals as a text table (signal | verdict | counted | evidence).
  returned: always
  type: str
fix:
  description: What to change when the guard failed, else null.
  returned: always
  type: str
notes:
  description: >-
    Inconsistencies worth a look (unit changed without a restart, log of another model, a unit whose running process
    could not be read); also shown as warnings.
  returned: always
  type: list
  elements: str
model:
  description: The model the server runs and the checkpoint judged.
  returned: always
  type: dict
  contains:
    path:
      description: The model path served (the launch command's, else the server's), or null.
      type: str
    source:
      description: C(argv) or C(/server_info), or null.
      type: str
    argv:
      description: The launch command's C(--model-path) or C(--model) (the last one given), or null.
      type: str
    server:
      description: C(model_path) of C(/server_info), or null.
      type: str
    conflict:
      description: Why the launch command and the server disagree (naming both), else null. The guard then fails.
      type: str
    checkpoint:
      description: The checkpoint directory inspected for the C(checkpoint) and C(pool_bytes) signals, or null.
      type: str
  sample:
    path: /models/Qwen3.5-397B-A17B-NVFP4
    source: argv
    argv: /models/Qwen3.5-397B-A17B-NVFP4
    server: /models/Qwen3.5-397B-A17B-NVFP4
    conflict: null
    checkpoint: /models/Qwen3.5-397B-A17B-NVFP4
argv:
  description: The launch command read from O(unit) or given in O(argv), with C(--api-key) values masked, or null.
  returned: always
  type: list
  elements: str
server:
  description: How the C(/server_info) request went, shaped like one entry of RV(llmops.sglang.server_info#module:endpoints); null when O(url) is empty.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils._checkpoint import CheckpointError, inspect_checkpoint
from ansible_collections.llmops.sglang.plugins.module_utils._kv_guard import (
    DEFAULT_MIN_SIGNALS,
    GuardError,
    checkpoint_to_inspect,
    evaluate,
    redact_argv,
    served_model,
)
from ansible_collections.llmops.sglang.plugins.module_utils._http import TLS_ARGUMENT_SPEC, OptionError, tls_from_params
from ansible_collections.llmops.sglang.plugins.module_utils._launch_args import select_launch_command
from ansible_collections.llmops.sglang.plugins.module_utils._server_info import DEFAULT_URL, ServerInfoError, gather
from ansible_collections.llmops.sglang.plugins.module_utils._systemd import SHOW_TIMEOUT, SystemdError, run, show
from ansible_collections.llmops.sglang.plugins.module_utils._systemd_exec import (
    ExecSyntaxError,
    loaded_differs,
    process_differs,
    read_cmdline,
    shown_commands,
    unit_commands,
)


def read_unit_argv(module, unit):
    """(argv or None, error or None, notes) from the unit: its ExecStart= split as systemd splits it (systemctl cat),
    checked against what systemd loaded (systemctl show) and, while it runs, the main process's /proc/PID/cmdline."""
    systemctl = module.get_bin_path("systemctl") or "systemctl"
    try:
        state = show(unit, ["ExecStart", "MainPID"], systemctl)
        rc, out, err = run([systemctl, "cat", "--", unit], timeout=SHOW_TIMEOUT)
        if rc != 0:
            raise SystemdError("systemctl cat %s failed (rc=%s): %s" % (unit, rc, " ".join(err.split())[:300]))
        commands = unit_commands(out.decode("utf-8", "replace"), unit if "." in unit else unit + ".service")
    except (SystemdError, ExecSyntaxError) as exc:
        return None, "%s; or pass argv instead of unit" % str(exc)[:500], []
    if not commands:
        return None, ("unit %s has no ExecStart (not installed, or the name is wrong: check systemctl status %s), or "
                      "pass argv" % (unit, unit)), []
    differs = loaded_differs(commands, shown_commands(state.get("ExecStart", "")))
    if differs:
        return None, differs, []
    argv = select_launch_command([command["argv"] for command in commands])
    if argv is None:
        return None, ("unit %s has %d ExecStart commands and none looks like an SGLang launch: pass argv"
                      % (unit, len(commands))), []
    command = next(c for c in commands if c["argv"] is argv)
    pid = state.get("MainPID", "0")
    cmdline = read_cmdline(pid) if pid.isdigit() and pid != "0" else None
    if cmdline is not None:
        differs = process_differs(command, cmdline)
        # the process's own argv is the unit's word for word, with the values of the unit's $VARIABLES filled in
        return (None, differs, []) if differs else (cmdline, None, [])
    return argv, None, ["unit %s: no running main process whose /proc/PID/cmdline could be read (MainPID %s), so its "
                        "ExecStart was not checked against what runs" % (unit, pid)] if pid != "0" else []


def main():
    module = AnsibleModule(
        argument_spec=dict(
            argv=dict(type="list", elements="str"),
            unit=dict(type="str"),
            checkpoint=dict(type="path"),
            gpu=dict(type="dict"),
            url=dict(type="str", default=DEFAULT_URL),
            api_key=dict(type="str", no_log=True),
            timeout=dict(type="float", default=10),
            **TLS_ARGUMENT_SPEC,
            log_facts=dict(type="dict"),
            log_source=dict(type="str", choices=["journal", "file"], default="journal"),
            tp_size=dict(type="int"),
            expected=dict(type="str", choices=["bf16", "fp8_e4m3"], default="bf16"),
            waiver_reason=dict(type="str"),
            min_signals=dict(type="int", default=DEFAULT_MIN_SIGNALS),
        ),
        mutually_exclusive=[("argv", "unit")],
        required_if=[("expected", "fp8_e4m3", ["waiver_reason"])],
        supports_check_mode=True,
    )
    p = module.params
    inputs = {
        "expected": p["expected"],
        "waiver_reason": p["waiver_reason"],
        "min_signals": p["min_signals"],
        "tp_size": p["tp_size"],
        "log_facts": p["log_facts"],
        "log_source": p["log_source"],
    }
    if p["tp_size"] is not None and p["tp_size"] < 1:
        module.fail_json(msg="tp_size must be >= 1 (the server's --tp-size), got %d" % p["tp_size"])

    unit_notes = []
    if p["unit"]:
        argv, error, unit_notes = read_unit_argv(module, p["unit"])
        inputs.update(argv=argv, argv_error=error, argv_source="unit %s ExecStart" % p["unit"])
    elif p["argv"] is not None:
        inputs.update(argv=p["argv"], argv_source="argv")

    server = None
    if p["url"]:
        try:
            tls = tls_from_params(p)
        except OptionError as exc:
            module.fail_json(msg=str(exc))
        try:
            got = gather(p["url"], p["api_key"] or None, ["server_info"], p["timeout"], tls)
        except ServerInfoError as exc:
            module.fail_json(msg="url: %s" % exc)
        server = got["endpoints"]["server_info"]
        if server["ok"]:
            inputs["server_info"] = got["server_info"]
        else:
            inputs["server_error"] = "%s: %s" % (server["error"]["class"], server["error"]["message"])

    # the checkpoint judged is the one the server runs (argv, /server_info), never the log's
    served = served_model(inputs.get("argv"), inputs.get("server_info"))
    path, why = checkpoint_to_inspect(served, p["checkpoint"])
    inputs["checkpoint_given"] = p["checkpoint"]
    if path:
        try:
            inputs["checkpoint"] = inspect_checkpoint(path, gpu=p["gpu"])
        except CheckpointError as exc:
            inputs["checkpoint_error"] = str(exc)
    elif why:
        inputs["checkpoint_error"] = why

    try:
        result = evaluate(inputs)
    except GuardError as exc:
        module.fail_json(msg=str(exc))
    result = dict(result, argv=redact_argv(inputs.get("argv"), p["api_key"]), server=server)
    msg = result.pop("message")
    result["notes"] = unit_notes + result["notes"]
    for note in result["notes"]:
        module.warn(note)
    if not result["passed"]:
        module.fail_json(msg=msg, changed=False, **result)
    module.exit_json(changed=False, msg=msg, **result)


if __name__ == "__main__":
    main()
