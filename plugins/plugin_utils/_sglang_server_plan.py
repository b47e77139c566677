# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to this collection's roles and plugins: runs on the controller only, not an API; it may change in
# any release without notice.
"""What the sglang_server role derives from its settings, in one place: file names, the launch arguments and the
unit's ExecStart/Environment lines, the multi-node layout, the URLs, and the verdict on every setting.

``plan(settings, host, groups, hostvars, play_batch)`` takes the role's settings (``sglang_server_*`` by their full
names, plus ``sglang_runtime_environment``) and the inventory, and returns a dict the role's tasks and templates only
read. Secrets never appear in it: the API key becomes the literal word ``${SGLANG_API_KEY}`` (the launcher fills it
in memory) and the verdicts name the variable, never its value.

Runs on the controller (a filter); no I/O.
"""

from __future__ import annotations

import os.path
import re


from ansible_collections.llmops.sglang.plugins.module_utils._http import WILDCARDS, OptionError, check_api_key, is_loopback, local_url, worker_url
from ansible_collections.llmops.sglang.plugins.module_utils._redact import is_secret_name
from ansible_collections.llmops.sglang.plugins.module_utils._coerce import jinja_int as _int, to_float as _float, truthy as _bool
from ansible_collections.llmops.sglang.plugins.module_utils._systemd import verify_command
from ansible_collections.llmops.sglang.plugins.module_utils._systemd_exec import ExecSyntaxError, command_line, environment_value

P = "sglang_server_"
LAUNCHER = "/usr/local/lib/llmops-sglang/launch_sglang.py"
# ExecStart carries this word (written $${...}, so systemd does not expand it); the launcher puts the key in its place.
API_KEY_REF = "${SGLANG_API_KEY}"
# Flags a variable manages; extra args must not set them again (nor an abbreviation: argparse takes --api-k).
MANAGED_FLAGS = ("--model-path", "--model", "--tp-size", "--tp", "--tensor-parallel-size", "--kv-cache-dtype", "--host",
                 "--port", "--api-key", "--admin-api-key", "--nnodes", "--node-rank", "--dist-init-addr")
BF16 = ("bf16", "bfloat16")
SPECULATIVE_ALGORITHMS = ("NEXTN", "EAGLE", "EAGLE3", "STANDALONE", "NGRAM")
MAMBA_STRATEGY_FLAGS = ("--mamba-radix-cache-strategy", "--mamba-scheduler-strategy")
MAMBA_STRATEGIES = ("extra_buffer", "extra_buffer_lazy")
# The settings plan() reads (vars/main.yml hands exactly these over).
SETTINGS = tuple(P + name for name in (
    "unit", "config_dir", "command", "nodes_group", "dist_init_host", "dist_init_port", "model_path",
    "served_model_name", "tp_size", "kv_cache_dtype", "kv_cache_dtype_waiver", "quantization", "moe_runner_backend",
    "fp4_gemm_backend", "attention_backend", "reasoning_parser", "tool_call_parser", "mem_fraction_static",
    "context_length", "max_running_requests", "speculative", "speculative_algorithm", "speculative_num_steps",
    "speculative_eagle_topk", "speculative_num_draft_tokens", "mamba_strategy_flag", "mamba_strategy", "host", "port",
    "enable_metrics", "api_key", "hf_token", "no_api_key_waiver", "extra_args", "environment", "ready_path",
    "routers_group", "verify_strict", "ready_timeout", "progress_interval", "timeout_stop_sec",
    "security_max_exposure", "gpu", "cuda_toolkit", "fp4_modules_prebuilt")) + (
    "sglang_runtime_environment",)
# Optional valued flags, in their order on the command line.
_OPTIONAL_FLAGS = (("--quantization", "quantization"), ("--moe-runner-backend", "moe_runner_backend"),
                   ("--fp4-gemm-backend", "fp4_gemm_backend"), ("--attention-backend", "attention_backend"),
                   ("--reasoning-parser", "reasoning_parser"), ("--tool-call-parser", "tool_call_parser"))
_NUMBER_FLAGS = (("--mem-fraction-static", "mem_fraction_static"), ("--context-length", "context_length"),
                 ("--max-running-requests", "max_running_requests"))
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Variables the role writes to the EnvironmentFile from its own settings: the environment must not set them again.
ROLE_SECRET_ENV = {"SGLANG_API_KEY": P + "api_key", "HF_TOKEN": P + "hf_token"}
_UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.@-]+$")
# Single-quoted in the EnvironmentFile: these characters would break out of the quotes.
_UNQUOTABLE = re.compile(r"['\\\n\r]")


class PlanError(ValueError):
    """Settings missing from the call (a wiring mistake, not a user's)."""


def _text(value):
    """A non-blank string (a waiver's reason), else False."""
    return isinstance(value, str) and bool(value.strip())


def exec_start(program, args):
    """ExecStart's value: the program's words, then one line per flag with its values."""
    words = [str(word) for word in program] + [str(arg) for arg in args]
    return command_line(words, breaks={len(program) + i for i, arg in enumerate(words[len(program):]) if arg.startswith("--")})


def environment_lines(env):
    """Environment= lines, names in case-insensitive order, each quoted by _systemd_exec (ExecSyntaxError when a value
    holds what a unit line cannot carry)."""
    return ["Environment=" + environment_value(key, env[key]) for key in sorted(env, key=lambda k: str(k).lower())]


def program(command, launcher=LAUNCHER):
    """ExecStart's program: SGLang's interpreter running the launcher, which runs the command's module, script or code
    in the same process; a command that starts with a script (<venv>/bin/sglang serve) runs under the python beside it."""
    command = [str(word) for word in command]
    if re.match(r"^python[0-9.]*$", os.path.basename(command[0])):
        return [command[0], launcher] + command[1:]
    return [os.path.dirname(command[0]) + "/python", launcher] + command


def managed_in_extra(extra_args):
    """The extra flags that are a managed flag or an abbreviation of one, as written (without =value)."""
    flags = [re.sub(r"=.*$", "", word) for word in map(str, extra_args) if word.startswith("--")]
    return [flag for flag in flags if len(flag) > 2 and any(m.startswith(flag) for m in MANAGED_FLAGS)]


def _get(mapping, key, default=None):
    try:
        return mapping.get(key, default)
    except AttributeError:
        return default


def layout(s, host, groups, hostvars):
    """Multi-node tensor parallel: the group's hosts (node 0 first), this host's rank (-1: not in the group), node 0
    and its rendezvous address (IPv6 bracketed, as SGLang parses it)."""
    group = s[P + "nodes_group"]
    nodes = list(_get(groups, group) or []) if group else [host]
    node0 = nodes[0] if nodes else host
    target = s[P + "dist_init_host"] or _get(_get(hostvars, node0, {}), "ansible_host", node0)
    target = str(target)
    addr = ("[%s]" % target if ":" in target else target) + ":" + str(s[P + "dist_init_port"])
    return {"nodes": nodes, "nnodes": len(nodes), "node_rank": nodes.index(host) if host in nodes else -1,
            "node0": node0, "dist_init_target": target, "dist_init_addr": addr}


def argv(s, nodes):
    """The launch arguments: the args check parses exactly this list and ExecStart is the command plus this list."""
    def opt(name):
        return s[P + name]
    out = ["--model-path", opt("model_path")]
    if opt("served_model_name"):
        out += ["--served-model-name", opt("served_model_name")]
    out += ["--tp-size", str(opt("tp_size"))]
    if nodes["nnodes"] > 1:
        out += ["--nnodes", str(nodes["nnodes"]), "--node-rank", str(nodes["node_rank"]),
                "--dist-init-addr", nodes["dist_init_addr"]]
    out += ["--kv-cache-dtype", opt("kv_cache_dtype")]
    out += [word for flag, name in _OPTIONAL_FLAGS if opt(name) for word in (flag, opt(name))]
    out += [word for flag, name in _NUMBER_FLAGS if opt(name) is not None for word in (flag, str(opt(name)))]
    if _bool(opt("speculative")):
        out += ["--speculative-algorithm", opt("speculative_algorithm"),
                "--speculative-num-steps", str(opt("speculative_num_steps")),
                "--speculative-eagle-topk", str(opt("speculative_eagle_topk")),
                "--speculative-num-draft-tokens", str(opt("speculative_num_draft_tokens")),
                opt("mamba_strategy_flag"), opt("mamba_strategy")]
    out += ["--host", opt("host"), "--port", str(opt("port"))]
    if _bool(opt("enable_metrics")):
        out.append("--enable-metrics")
    if opt("api_key"):
        out += ["--api-key", API_KEY_REF]
    return out + [str(word) for word in opt("extra_args") or []]


def environment(s):
    """Environment= of the unit: the runtime's, then the user's, then what the flags require."""
    env = dict(s["sglang_runtime_environment"] or {})
    if isinstance(s[P + "environment"], dict):
        env.update(s[P + "environment"])
    if _bool(s[P + "speculative"]):
        env["SGLANG_ENABLE_SPEC_V2"] = "1"
    return env


def secret_environment(env):
    """The names in env that _redact calls secret (AWS_SECRET_ACCESS_KEY, ACCESS_TOKEN, OPENAI_API_KEY): their values go
    to the root-only EnvironmentFile, not into the world-readable unit. The one name rule of the redaction: a name
    it suspects wrongly (SGLANG_LOG_DECODE_GRAPH_KEY) still reaches SGLang, only privately."""
    return sorted((str(name) for name in env if is_secret_name(str(name))), key=str.lower)


def unit_environment(env):
    """Environment= of the unit: env without its secret names."""
    secret = secret_environment(env)
    return dict((name, value) for name, value in env.items() if str(name) not in secret)


def router_urls(s, host, groups, hostvars):
    """Where each router in front of this server (its router_worker_group holds this host) is reached from here."""
    urls = []
    for name in _get(groups, s[P + "routers_group"] or "", []) or []:
        hv = _get(hostvars, name, {})
        if host in (_get(groups, _get(hv, "router_worker_group") or "sglang_servers", []) or []):
            urls.append(worker_url(_get(hv, "router_host") or "", _get(hv, "router_port") or 30000,
                                   _get(hv, "ansible_host") or name))
    return urls


def problems(s, nodes, env, extra_managed, play_batch):
    """Every setting the role refuses, each as a message naming the variable and the fix (never a secret's value)."""
    out = []
    kv, host, key = s[P + "kv_cache_dtype"], s[P + "host"], s[P + "api_key"]
    if kv not in BF16 and not _text(s[P + "kv_cache_dtype_waiver"]):
        out.append("sglang_server_kv_cache_dtype is %s, not bf16: the KV cache would be stored quantized (the checkpoint's "
                   "kv_cache_quant_algo FP8 runs with unit scales). Use bf16, or set sglang_server_kv_cache_dtype_waiver to "
                   "the reason this deployment accepts it." % kv)
    if not (is_loopback(host) or (isinstance(key, str) and key) or _text(s[P + "no_api_key_waiver"])):
        out.append("sglang_server_host is %s (reachable from other machines) but no sglang_server_api_key is set: anyone on "
                   "the network could use the model. Set an API key, bind to 127.0.0.1, or set "
                   "sglang_server_no_api_key_waiver to the reason." % host)
    if not all(v is None or (isinstance(v, str) and not _UNQUOTABLE.search(v)) for v in (key, s[P + "hf_token"])):
        out.append("sglang_server_api_key and sglang_server_hf_token must be strings without single quotes, backslashes or "
                   "line breaks (they are written single-quoted into %s/%s.env)." % (s[P + "config_dir"], s[P + "unit"]))
    unsendable = [P + name for name in ("api_key", "hf_token") if not _sendable(s[P + name])]
    if unsendable:
        out.append("%s must be printable ASCII without spaces (no tab, no-break or zero-width space, no character outside "
                   "ASCII): it is sent as 'Authorization: Bearer KEY', and SGLang logs it escaped in its server_args dump, "
                   "where no mask of the raw value finds it. Check it for a pasted line break or a typographic character."
                   % " and ".join(unsendable))
    if extra_managed:
        out.append("sglang_server_extra_args sets %s (SGLang's parser takes an abbreviation for the whole flag): use the "
                   "role's variables for these (the API key belongs in sglang_server_api_key, which keeps it off every "
                   "command line)." % ", ".join(extra_managed))
    owned = ["%s (set %s)" % (name, ROLE_SECRET_ENV[name]) for name in sorted(map(str, env)) if name in ROLE_SECRET_ENV]
    if not isinstance(s[P + "environment"], dict) or owned or not all(_ENV_NAME.match(str(n)) for n in env):
        out.append("sglang_server_environment must map variable names ([A-Za-z_][A-Za-z0-9_]*) to values, and must not set "
                   "the variables the role writes from its own settings (%s)." % (", ".join(owned) or "none"))
    unquotable = [name for name in secret_environment(env) if _UNQUOTABLE.search(str(env[name]))]
    if unquotable:
        out.append("sglang_server_environment: %s hold a secret by name and are written single-quoted into the root-only "
                   "%s/%s.env, so their values must not contain single quotes, backslashes or line breaks."
                   % (", ".join(unquotable), s[P + "config_dir"], s[P + "unit"]))
    out += _speculative_problems(s) if _bool(s[P + "speculative"]) else []
    out += _unit_problems(s)
    out += _node_problems(s, nodes, play_batch) if s[P + "nodes_group"] is not None else []
    return out


def _sendable(secret):
    """True when a key can travel as a Bearer credential (_http's rule); None and "" are no key."""
    try:
        check_api_key(secret)
    except OptionError:
        return False
    return True


def _speculative_problems(s):
    def opt(name):
        return s[P + name]
    if (opt("speculative_algorithm") in SPECULATIVE_ALGORITHMS and opt("mamba_strategy_flag") in MAMBA_STRATEGY_FLAGS
            and opt("mamba_strategy") in MAMBA_STRATEGIES and min(_int(opt("speculative_num_steps")),
                                                                  _int(opt("speculative_eagle_topk")),
                                                                  _int(opt("speculative_num_draft_tokens"))) >= 1):
        return []
    return ["speculative decoding needs an algorithm (NEXTN for Qwen3.5's MTP layer), positive num_steps / eagle_topk / "
            "num_draft_tokens, and the Mamba radix cache strategy extra_buffer (SGLANG_ENABLE_SPEC_V2=1 is added by the "
            "role); got algorithm %s, steps %s, top-k %s, draft tokens %s, %s %s." % tuple(opt(n) for n in (
                "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                "speculative_num_draft_tokens", "mamba_strategy_flag", "mamba_strategy"))]


def _unit_problems(s):
    def opt(name):
        return s[P + name]
    unit, command, mem = str(opt("unit")), opt("command") or [], opt("mem_fraction_static")
    good = (_UNIT_NAME.match(unit) and not unit.endswith(".service")
            and len(command) > 0 and os.path.isabs(str(command[0])) and os.path.isabs(str(opt("model_path")))
            and _int(opt("tp_size")) >= 1 and 0 < _int(opt("port")) < 65536
            and (mem is None or 0 < _float(mem) < 1)
            and min(_int(opt("ready_timeout")), _int(opt("progress_interval")), _int(opt("timeout_stop_sec"))) > 0)
    if good:
        return []
    return ["sglang_server_unit must be a unit name without .service (%s), sglang_server_command start with an absolute "
            "path, sglang_server_model_path be absolute, tp_size >= 1, port 1-65535, mem_fraction_static in (0, 1), and "
            "ready_timeout, progress_interval and timeout_stop_sec positive." % unit]


def _node_problems(s, nodes, play_batch):
    missing = [n for n in nodes["nodes"] if n not in (play_batch or [])]
    target = nodes["dist_init_target"]
    if (nodes["node_rank"] >= 0 and _int(s[P + "tp_size"]) % nodes["nnodes"] == 0 and not missing
            and 0 < _int(s[P + "dist_init_port"]) < 65536 and not is_loopback(target) and target.strip("[]") not in WILDCARDS):
        return []
    return ["sglang_server_nodes_group %s: %s must be one of its hosts (%s); tp_size %s must be a multiple of the %s nodes; "
            "every node must be in this play batch (missing: %s; in site.yml set sglang_serial to a multiple of the "
            "group's size and keep its hosts adjacent in sglang_servers); and node 0's rendezvous %s must be an address "
            "the other nodes reach (set sglang_server_dist_init_host)." % (
                s[P + "nodes_group"], nodes["host"], ", ".join(nodes["nodes"]) or "the group is empty or missing",
                s[P + "tp_size"], nodes["nnodes"], ", ".join(missing) or "none", nodes["dist_init_addr"])]


def _verify(service, strict):
    """systemd-analyze's check of the new unit (_systemd's one command); None for a name _unit_problems refuses."""
    try:
        return verify_command(service, _bool(strict))
    except ValueError:
        return None


def fp4_check(s):
    """sglang_args_check's FP4 options (None: left unset) from what the preflight found (sglang_server_gpu, sglang_server_cuda_toolkit:
    its gpu_info and cuda_toolkit_info results): the GPUs' compute capability (None: not known or not one, nothing
    checked), the host's nvcc release (None: not known; "none": the host has none) and whether the FlashInfer FP4
    modules were built ahead of time."""
    gpu, toolkit = s[P + "gpu"], s[P + "cuda_toolkit"]
    caps = sorted({str(g["compute_capability"]) for g in (gpu.get("gpus") or [] if isinstance(gpu, dict) else [])
                   if isinstance(g, dict) and g.get("compute_capability")})
    nvcc = None
    if isinstance(toolkit, dict) and "installed" in toolkit:
        nvcc = str(toolkit.get("release") or "none") if toolkit["installed"] else "none"
    return {"gpu": caps[0] if len(caps) == 1 else None, "nvcc": nvcc, "prebuilt": _bool(s[P + "fp4_modules_prebuilt"])}


def plan(settings, host, groups, hostvars, play_batch=None):
    """Everything the role derives, as one dict (see the module's docstring)."""
    missing = [name for name in SETTINGS if name not in settings]
    if missing:
        raise PlanError("settings missing: %s (pass every name of SETTINGS)" % ", ".join(missing))
    s = settings
    unit = str(s[P + "unit"])
    conf = "%s/%s" % (s[P + "config_dir"], unit)
    service, unit_file = unit + ".service", "/etc/systemd/system/%s.service" % unit
    nodes = dict(layout(s, host, groups, hostvars), host=host)
    args, env = argv(s, nodes), environment(s)
    unit_env, secret_env = unit_environment(env), secret_environment(env)
    exe = program(s[P + "command"] or [""])
    extra_managed = managed_in_extra(s[P + "extra_args"] or [])
    local = local_url(s[P + "host"], s[P + "port"])
    self_host = _get(_get(hostvars, host, {}), "ansible_host") or host
    files = [(unit_file, "0644", False), (conf + ".argv.json", "0644", False), (conf + ".env", "0600", True)]
    try:
        start, unwritable = exec_start(exe, args), []
    except ExecSyntaxError as exc:
        start, unwritable = None, ["A launch word cannot go into the unit's ExecStart=: %s (check sglang_server_command, "
                                   "sglang_server_model_path and sglang_server_extra_args)." % exc]
    try:
        env_lines = environment_lines(unit_env)
    except ExecSyntaxError as exc:
        env_lines, unwritable = [], unwritable + ["A variable cannot go into the unit's Environment=: %s (check "
                                                  "sglang_server_environment)." % exc]
    return {
        "service": service, "unit_file": unit_file, "unit_prev": unit_file + ".prev", "env_file": conf + ".env",
        "argv_file": conf + ".argv.json",
        "prev_files": [{"current": f, "previous": f + ".prev", "mode": m, "secret": x} for f, m, x in files],
        "launcher": LAUNCHER, "exec": exe, "argv": args, "env": unit_env, "secret_env": secret_env,
        "exec_start": start, "environment_lines": env_lines,
        "record": {"unit": service, "command": s[P + "command"], "args": args, "environment": unit_env,
                   "secrets": [n for n, v in (("SGLANG_API_KEY", s[P + "api_key"]), ("HF_TOKEN", s[P + "hf_token"])) if v]
                   + secret_env},
        "nodes": nodes["nodes"], "nnodes": nodes["nnodes"], "node_rank": nodes["node_rank"], "node0": nodes["node0"],
        "dist_init_addr": nodes["dist_init_addr"], "nodes_group": s[P + "nodes_group"], "extra_managed": extra_managed,
        "host_is_loopback": is_loopback(s[P + "host"]), "local_url": local, "health_url": local + str(s[P + "ready_path"]),
        "worker_url": worker_url(s[P + "host"], s[P + "port"], self_host),
        "router_urls": router_urls(s, host, groups, hostvars),
        "verify_command": _verify(service, s[P + "verify_strict"]), "ready_path": s[P + "ready_path"],
        "ready_timeout": s[P + "ready_timeout"], "security_max_exposure": s[P + "security_max_exposure"],
        "problems": problems(s, nodes, env, extra_managed, play_batch) + unwritable,
        "fp4": fp4_check(s),
    }


# ---------------------------------------------------------------------------------------------
# Verdicts on what the tasks found on the host


def exposure(stdout, max_exposure, service):
    """`systemd-analyze security UNIT`'s overall exposure, as {exposure, rating, message, failure}: failure is None
    when the exposure is at most max_exposure (None: any is accepted)."""
    found = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\S+)", stdout or "")
    level, rating = (float(found.group(1)), found.group(2)) if found else (None, None)
    accepted = "any" if max_exposure is None else max_exposure
    failure = None
    if max_exposure is not None and (level is None or level > _float(max_exposure)):
        failure = ("%s has a systemd-analyze security exposure of %s, above %s: a hardening option was turned off; see "
                   "`systemd-analyze security %s` on the host." % (service, level, max_exposure, service))
    return {"exposure": level, "rating": rating, "failure": failure,
            "message": "systemd-analyze security %s: exposure %s %s (0 = fully confined, 10 = unprotected; accepted up "
                       "to %s)" % (service, level, rating, accepted)}


def node_verdict(node0_wait, plan, state, started):
    """For a node other than node 0: None when node 0 is ready and this node still runs the invocation it started
    (``state`` and ``started`` are systemd_service results), else why not."""
    node0_wait, status = node0_wait or {}, (state or {}).get("status") or {}
    head = "node %s of %s (%s): " % (plan["node_rank"], plan["nnodes"], plan["nodes_group"])
    if node0_wait.get("status") != "ready":
        return head + "node 0 (%s) is not ready: %s" % (plan["node0"], node0_wait.get("msg", "it failed before its readiness wait"))
    if (status.get("ActiveState"), status.get("SubState")) == ("active", "running") and \
            status.get("InvocationID") == ((started or {}).get("status") or {}).get("InvocationID"):
        return None
    return head + "%s here is %s/%s (NRestarts %s); see journalctl -u %s" % (
        plan["service"], status.get("ActiveState"), status.get("SubState"), status.get("NRestarts"), plan["service"])


def phases(seen, new):
    """The startup phases so far: ``seen`` then ``new``, a phase repeated back to back kept once (its first sighting)."""
    out = list(seen or [])
    for step in new or []:
        if not out or out[-1]["phase"] != step["phase"]:
            out.append(step)
    return out


def drain_text(leave):
    """What a router_worker leave (state absent with a drain) did, for the play's output."""
    left = _removed(leave)
    drain = leave.get("drain")
    if not drain:
        done = "not drained (check mode)"
    elif drain.get("in_flight_before") is None:
        done = "no metrics to drain by"
    else:
        done = "%s request(s) running or queued, %s left after %s s" % (
            drain["in_flight_before"], drain.get("in_flight"), drain.get("waited_s"))
    return "%s left %s; %s" % (leave.get("worker_url"), ", ".join(left), done)


# The role's registered results and facts that outcome() reads (vars/main.yml hands exactly these over).
RESULTS = tuple("_sglang_server_" + name for name in (
    "changing", "start", "node_start", "args", "wait", "phases", "after", "security_raw", "node0_wait", "node_state",
    "node_started", "router_leave", "serves"))


def outcome(results, plan):
    """What the role's tasks found, from the plan and their results (None for one that did not run): sglang_server_info,
    the verdict for set_stats, the readiness wait's phases and progress line, the exposure, a follower node's
    verdict, the routers' drain and join lines and a rollback's closing words."""
    # The role hands a result that did not run over as {} (the vars lookup's default).
    results = dict((k, None if v == {} else v) for k, v in results.items())

    def get(name):
        return results.get("_sglang_server_" + name) or {}
    after, wait, raw = get("after").get("status") or {}, get("wait"), get("security_raw")
    changing = results.get("_sglang_server_changing")
    security = None if raw.get("skipped") or "stdout" not in raw else exposure(
        raw["stdout"], plan["security_max_exposure"], plan["service"])
    info = {
        "unit": plan["service"], "unit_file": plan["unit_file"], "command": plan["record"]["command"],
        "args": plan["argv"], "health_url": plan["health_url"], "changed": _bool(changing or False),
        "restarted": any(get(name).get("changed", False) for name in ("start", "node_start")),
        "node_rank": plan["node_rank"], "nnodes": plan["nnodes"],
        "args_check": {"sglang_version": get("args").get("sglang_version"), "valid": get("args").get("valid")},
        "ready": wait.get("ready", False), "ready_after": wait.get("elapsed"),
        "phases": results.get("_sglang_server_phases") or [],
        "invocation_id": after.get("InvocationID"), "exec_main_start": after.get("ExecMainStartTimestamp"),
        "security": {"exposure": security["exposure"], "rating": security["rating"]} if security else None,
    }
    done = ("Rolled back %s to the previous unit (%s)" % (plan["service"], plan["prev_files"][0]["previous"])
            if changing is None or _bool(changing) else "Restarted %s (its files had not changed)" % plan["service"])
    health = wait.get("health") or {}
    serves = get("serves").get("status") or "nothing"
    return {
        "info": info,
        "verdict": ("ready" if info["ready"] else "not checked") + (
            "" if info["security"] is None else ", exposure %s" % info["security"]["exposure"]),
        "phases": phases(results.get("_sglang_server_phases"), wait.get("phases")),
        "waiting": "%s: %s after %s s (%s: %s); waiting up to %s s" % (
            plan["service"], wait.get("phase"), int(round(_float(wait.get("elapsed")))), plan["ready_path"],
            health.get("status") or health.get("error"), plan["ready_timeout"]),
        "exposure": security,
        "node_verdict": node_verdict(get("node0_wait"), plan, get("node_state"), get("node_started")),
        "drained": drain_text(get("router_leave")) if _removed(get("router_leave")) else None,
        "stays_out": "%s stays out of %s: %s answered %s, not 200. Once it serves, re-run the play (or "
                     "llmops.sglang.router_worker with state present)." % (
                         plan["worker_url"], ", ".join(plan["router_urls"]), plan["health_url"], serves),
        "rollback": "%s: it is ready again after %s s (invocation %s)." % (done, wait.get("elapsed"), wait.get("invocation_id")),
    }


def _removed(leave):
    return [r["router"] for r in leave.get("routers") or [] if r.get("action") == "removed"]


def _outcome(settings, results, plan_):
    return outcome(results, plan_)


# The phases of the role's one filter, llmops.sglang.sglang_server_plan: each takes the settings first. "plan" is computed
# once per entry point (tasks/plan.yml keeps it as the fact _sglang_server_plan); "outcome" reads the RESULTS.
PHASES = {"plan": plan, "outcome": _outcome}
ERRORS = (PlanError,)
