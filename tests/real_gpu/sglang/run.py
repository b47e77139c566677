"""The real-SGLang run: one real SGLang server per scenario on this machine's GPU, the collection against it.

Started by run.sh (which installs the wheels into a --target folder on PYTHONPATH). For each scenario: start
`python3 -m sglang.launch_server` with setsid (its own process group; output appended to a log file), run
scenario.yml with ansible-playbook on a local connection (sglang_wait_ready, server_info, checkpoint_info,
log_audit, kv_cache_guard, the audit role's guard entry point; benchmark, accuracy_canary and forged requests
where the scenario says), fetch the raw /server_info, stop the server with SIGTERM to its process group
(kill -- -PID), then judge every result against what the scenario expects.

Writes to $OUT: verdict.json, verdict.md (this call's scenarios), verdict-all.json, verdict-all.md (every
scenario run on this machine so far, the latest of each), real-sglang.tar.gz (logs, trimmed logs, raw answers,
module results).
"""

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.request
import uuid

import attack

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
RG = os.environ.get("RG_ROOT", "/tmp/real-gpu")
OUT = os.environ.get("OUT") or os.path.join(RG, "out")
PORT = 30000
URL = "http://127.0.0.1:%d" % PORT
# A throwaway key for a loopback server that lives minutes; SGLang 0.5.16 prints it in its server_args dump
# and /server_info, so the recorded answers show it: the redaction tests can look for this exact string.
API_KEY = "rg-test-key-not-a-secret"
READY_BUDGET = 420
# NVLink multicast stays off on shared GPU hosts; the triton backends avoid FlashInfer JIT builds.
SERVER_ENV = {"SGLANG_USE_SGL_FA3_KERNEL": "1", "HF_HUB_OFFLINE": "1", "NCCL_NVLS_ENABLE": "0",
              "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
SERVER_FLAGS = ["--host", "127.0.0.1", "--port", str(PORT), "--attention-backend", "triton", "--sampling-backend", "pytorch",
                "--disable-cuda-graph", "--mem-fraction-static", "0.3"]

# The attack scenarios echo whole prompts (level 3: no truncation) and take a prompt of 48 KiB (about 37k tokens of
# attack.py's filler) beyond the tiny checkpoint's 8192-token context.
ATTACK_FLAGS = ["--log-requests-level", "3", "--context-length", "65536"]
ATTACK_ENV = {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}

# expect: the KV cache dtype the guard must find (bf16 passes, fp8 fails: the deployment requires bf16);
# warning: whether SGLang prints the FP8 no-scales warning (only for an explicit fp8_e4m3 flag).
SCENARIOS = {
    "trap-auto": dict(checkpoint="trap-fp8", kv="auto", expect="fp8", warning=False,
                      about="FP8 checkpoint, --kv-cache-dtype auto: SGLang picks FP8 from hf_quant_config.json, silently"),
    "trap-bf16": dict(checkpoint="trap-fp8", kv="bf16", expect="bf16", warning=False, log_requests=True, bench=True, canary=True,
                      forge=True, about="FP8 checkpoint, bf16 KV; benchmark, canary; then forged requests (--log-requests)"),
    "trap-fp8": dict(checkpoint="trap-fp8", kv="fp8_e4m3", expect="fp8", warning=True,
                     about="FP8 checkpoint, explicit fp8_e4m3: the no-scales warning"),
    "hybrid-bf16": dict(checkpoint="hybrid", kv="bf16", expect="bf16", warning=False, mamba=True,
                        about="Qwen3-Next hybrid (Mamba pool), bf16 KV"),
    "hybrid-fp8": dict(checkpoint="hybrid", kv="fp8_e4m3", expect="fp8", warning=True, mamba=True,
                       about="Qwen3-Next hybrid (Mamba pool), explicit fp8_e4m3"),
    "attack-auto": dict(checkpoint="trap-fp8", kv="auto", expect="fp8", warning=False, log_requests=True,
                        attack={"decoy_kv": "bf16"}, flags=ATTACK_FLAGS, env=ATTACK_ENV,
                        about="FP8 checkpoint, auto; a client forges a bf16 start through what SGLang logs raw (attack.py)"),
    "attack-bf16": dict(checkpoint="trap-fp8", kv="bf16", expect="bf16", warning=False, log_requests=True,
                        attack={"decoy_kv": "fp8_e4m3", "warning": True}, flags=ATTACK_FLAGS, env=ATTACK_ENV,
                        about="FP8 checkpoint, bf16 KV; a client forges an FP8 start and the no-scales warning (attack.py)"),
    "trap-bf16-logms": dict(checkpoint="trap-fp8", kv="bf16", expect="bf16", warning=False, env={"SGLANG_LOG_MS": "1"},
                            about="FP8 checkpoint, bf16 KV, SGLANG_LOG_MS=1 (milliseconds in every log timestamp)"),
}
EFFECTIVE = {"bf16": "torch.bfloat16", "fp8": "torch.float8_e4m3fn"}
# log facts that no client request may change
STABLE_FACTS = ("kv_cache_dtype_configured", "kv_dtype_effective", "fp8_scale_warning", "model_path", "tp_size",
                "max_total_num_tokens", "sglang_version")
TRIM_CHARS = 400
# the log audit's finding for a startup record written after the server was ready (a client's forgery)
LATE_STARTUP_RULE = "startup_record_after_ready"
LAUNCH = [sys.executable, "-m", "sglang.launch_server"]
# --simulator: the project's SGLang simulator instead of SGLang, to try the harness on a machine without a GPU
SIMULATOR = os.path.join(ROOT, "tests", "lab", "sglang_sim", "sglang_sim.py")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
ECHO = re.compile(r"\] (?:Receive(?: OpenAI)?|Finish): obj=")


def say(text):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), text), flush=True)


def run(argv, **kw):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False, **kw)


def environment():
    """What ran where: GPU, driver, Python, torch, SGLang, ansible-core, the tree's commit."""
    try:
        smi = run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]).stdout.strip()
    except OSError as exc:
        smi = "no nvidia-smi (%s)" % exc
    probe = run([sys.executable, "-c", "import json, torch, sglang, transformers, ansible.release as a; print(json.dumps("
                 "{'torch': torch.__version__, 'cuda': torch.version.cuda, 'sglang': sglang.__version__, "
                 "'transformers': transformers.__version__, 'ansible_core': a.__version__}))"]).stdout.strip().splitlines()
    try:
        versions = json.loads(probe[-1])
    except (ValueError, IndexError):
        versions = {"error": " ".join(probe)[-500:]}
    return dict(versions, gpu=smi, python=platform.python_version(), kernel=platform.release(),
                commit=os.environ.get("RG_COMMIT"), date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


def make_checkpoints(ckpt):
    if os.path.exists(os.path.join(ckpt, ".done")):
        return 0.0
    t0 = time.time()
    shutil.rmtree(ckpt, ignore_errors=True)
    proc = run([sys.executable, os.path.join(HERE, "checkpoints.py"), ckpt])
    print(proc.stdout[-3000:], flush=True)
    if proc.returncode != 0:
        raise SystemExit("making the tiny checkpoints failed (above)")
    open(os.path.join(ckpt, ".done"), "w").close()
    return round(time.time() - t0, 1)


def stand_in_bin(bindir, units):
    """systemctl and journalctl in bindir (first on PATH), answered by units.py for the servers started here."""
    os.makedirs(bindir, exist_ok=True)
    os.makedirs(units, exist_ok=True)
    for tool in ("systemctl", "journalctl"):
        path = os.path.join(bindir, tool)
        with open(path, "w") as fh:
            fh.write('#!/bin/sh\nRG_TOOL=%s RG_UNITS=%s exec %s %s "$@"\n' % (tool, units, sys.executable, os.path.join(HERE, "units.py")))
        os.chmod(path, 0o755)
    return bindir


class Server(object):
    """One SGLang server in its own process group, its output appended to a log, described as a unit."""

    def __init__(self, name, spec, ckpt, work, units):
        self.name, self.spec, self.work, self.units = name, spec, work, units
        self.checkpoint = os.path.join(ckpt, spec["checkpoint"])
        self.log = os.path.join(work, "server.log")
        self.argv = (LAUNCH + ["--model-path", self.checkpoint, "--kv-cache-dtype", spec["kv"]] + SERVER_FLAGS
                     + (["--log-requests"] if spec.get("log_requests") else []) + spec.get("flags", []))
        self.env = dict(SERVER_ENV, **spec.get("env", {}))
        self.proc = None

    def start(self):
        self.started = time.time()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv + ["--api-key", API_KEY], stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True, env=dict(os.environ, **self.env))
        record = {"pid": self.proc.pid, "argv": self.argv + ["--api-key", API_KEY], "env": self.env, "log": self.log,
                  "invocation_id": uuid.uuid4().hex, "start_monotonic_us": int(time.monotonic() * 1e6)}
        with open(os.path.join(self.units, "sglang-rg.json"), "w") as fh:
            json.dump(record, fh)
        say("%s: started pid %d: %s" % (self.name, self.proc.pid, " ".join(self.argv + ["--api-key", "***"])))

    def stop(self, grace=30):
        """SIGTERM to the process group (kill -- -PID), SIGKILL after grace seconds; returns seconds taken."""
        t0 = time.time()
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        while time.time() - t0 < grace and self._group_alive():
            time.sleep(0.5)
        if self._group_alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
            time.sleep(1)
        self.proc.wait()
        return round(time.time() - t0, 1)

    def _group_alive(self):
        self.proc.poll()
        try:
            os.killpg(self.proc.pid, 0)
        except ProcessLookupError:
            return False
        # the group leader is reaped by poll(); others may remain
        return any(_pgid(pid) == self.proc.pid for pid in _pids())


def _pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _pgid(pid):
    try:
        with open("/proc/%d/stat" % pid) as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[2]) if fields[0] != "Z" else None
    except (OSError, IndexError, ValueError):
        return None


def fetch_raw(path):
    """The answer's bytes as the server sent them (the fixtures keep SGLang's own serialization)."""
    req = urllib.request.Request(URL + path, headers={"Authorization": "Bearer " + API_KEY})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.read(8 << 20)
    except Exception as exc:  # recorded, not raised: the run goes on
        return json.dumps({"error": "%s: %s" % (type(exc).__name__, exc)}).encode()


def playbook(name, spec, server, work, bindir, units):
    result_file = os.path.join(work, "result.json")
    variables = {"rg_unit": "sglang-rg", "rg_url": URL, "rg_api_key": API_KEY, "rg_checkpoint": server.checkpoint,
                 "rg_argv": server.argv + ["--api-key", API_KEY], "rg_log": server.log, "rg_ready_budget": READY_BUDGET,
                 "rg_result_file": result_file, "rg_bench": bool(spec.get("bench")), "rg_canary": bool(spec.get("canary")),
                 "rg_forge": bool(spec.get("forge")), "rg_attack": spec.get("attack"), "rg_harness": HERE}
    vars_file = os.path.join(RG, "vars-%s.json" % name)
    with open(vars_file, "w") as fh:
        json.dump(variables, fh)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), RG_UNITS=units, LC_ALL="C.UTF-8",
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    t0 = time.time()
    proc = run([sys.executable, "-m", "ansible.cli.playbook", "-i", "localhost,", "-e", "@" + vars_file,
                os.path.join(HERE, "scenario.yml")], cwd=ROOT, env=env)
    with open(os.path.join(work, "playbook.log"), "w") as fh:
        fh.write(proc.stdout)
    os.remove(vars_file)
    try:
        with open(result_file) as fh:
            result = json.load(fh)
    except (OSError, ValueError) as exc:
        result = {"error": "no result file (%s); playbook rc %d: %s" % (exc, proc.returncode, proc.stdout[-2000:])}
    return result, proc.returncode, round(time.time() - t0, 1)


# ---------------------------------------------------------------------------------------------------------
# judging


def _get(data, *keys):
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _rules(log_audit):
    return sorted(f.get("rule") for f in (_get(log_audit, "findings") or []))


def forged_lines(log, payload):
    """How many physical lines of the server's log are one of attack.py's forged records, whole (the last one may
    carry the rest of SGLang's message, e.g. ' is not supported.'): proof that SGLang wrote them raw."""
    records = [line for line in (payload or "").split("\n") if line]
    count = 0
    try:
        with open(log, "rb") as fh:
            for raw in fh:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                if any(line == rec or (rec == records[-1] and line.startswith(rec)) for rec in records):
                    count += 1
    except OSError:
        return None
    return count


def cut_echo_forges(log, payload):
    """Whether a request echo in the log is longer than journald's LineMax and its bytes from LineMax on start with
    attack.py's first forged record: the entry journald would start there is the client's."""
    first = [line for line in (payload or "").split("\n") if line][:1]
    if not first:
        return False
    with open(log, "rb") as fh:
        return any(b"Receive: obj=" in raw and raw[attack.LINE_MAX:].startswith(first[0].encode()) for raw in fh)


def judge(name, spec, result, checkpoint, sglang_version, log=None):
    """[{check, expected, got, ok}] for one scenario's results (log: the server's log, read for attack scenarios)."""
    checks = []

    def check(what, expected, got, ok=None):
        checks.append({"scenario": name, "check": what, "expected": expected, "got": got,
                       "ok": bool(expected == got if ok is None else ok)})

    check("sglang_wait_ready says ready", "ready",
          _get(result, "ready", "status") or _get(result, "ready", "msg") or result.get("error"))
    if _get(result, "ready", "status") != "ready" and _get(result, "ready_http", "status") != 200:
        return checks
    want_pass = spec["expect"] == "bf16"
    for phase in ("clean", "forged") if spec.get("forge") or spec.get("attack") else ("clean",):
        p = result.get(phase) or {}
        facts = _get(p, "log_audit", "facts") or {}
        tag = "" if phase == "clean" else " after forged requests"
        check("guard verdict%s" % tag, spec["expect"], _get(p, "guard", "verdict"))
        check("guard passed%s" % tag, want_pass, _get(p, "guard", "passed"))
        check("audit role guard verdict%s" % tag, spec["expect"], _get(p, "audit_guard", "verdict"))
        check("audit role guard passed%s" % tag, want_pass, _get(p, "audit_guard", "passed"))
        check("log: --kv-cache-dtype as configured%s" % tag, spec["kv"], facts.get("kv_cache_dtype_configured"))
        check("log: KV pool dtype%s" % tag, EFFECTIVE[spec["expect"]], facts.get("kv_dtype_effective"))
        check("log: FP8 no-scales warning%s" % tag, spec["warning"], facts.get("fp8_scale_warning"))
        check("log: fp8_kv_no_scales finding%s" % tag, spec["warning"], "fp8_kv_no_scales" in _rules(p.get("log_audit")))
        check("log: model path%s" % tag, checkpoint, facts.get("model_path"))
        check("audit role: checkpoint audited%s" % tag, checkpoint, p.get("audit_model_dir"))
        if spec.get("mamba"):
            check("log: Mamba pool%s" % tag, "present", "present" if facts.get("mamba_pool") else facts.get("mamba_pool"))
    if spec.get("forge"):
        clean, forged = result.get("clean") or {}, result.get("forged") or {}
        before = dict((k, _get(clean, "log_audit", "facts", k)) for k in STABLE_FACTS)
        after = dict((k, _get(forged, "log_audit", "facts", k)) for k in STABLE_FACTS)
        check("forged requests reached the server", "GET answered 401, chats 200",
              "GET answered %s, chats %s" % (_get(result, "forge", "get_status"), _get(result, "forge", "chat_status")),
              ok=_get(result, "forge", "get_status") == 401 and _get(result, "forge", "chat_status") == [200, 200])
        check("forged requests change no log fact", before, after)
        check("forged requests add no log finding", _rules(clean.get("log_audit")), _rules(forged.get("log_audit")))
    if spec.get("attack"):
        clean, forged, sent = result.get("clean") or {}, result.get("forged") or {}, result.get("attack") or {}
        dup = _get(sent, "duplicate_rid", "second") or [None, ""]
        check("attack: set_internal_state and the duplicate rid reached SGLang", "200, 200 with 'Duplicate request ID'",
              "%s, %s %s" % ((sent.get("set_internal_state") or [None])[0], dup[0], (dup[1] or "")[:120]),
              ok=(sent.get("set_internal_state") or [None])[0] == 200 and dup[0] == 200 and "Duplicate request ID" in (dup[1] or ""))
        check("attack: prompts longer than LineMax answered (echo offset measured)", [200, 200, 200],
              [p.get("status") for p in sent.get("long_prompts") or []] or sent.get("echo_text_offset"))
        check("attack: an echo line that journald cuts at LineMax goes on with a forged record", True,
              bool(log) and cut_echo_forges(log, sent.get("payload")))
        n = forged_lines(log, sent.get("payload")) if log else None
        per_carrier = len([line for line in (sent.get("payload") or "").split("\n") if line])
        check("attack: SGLang wrote the forged records as lines of its own (set_internal_state, duplicate rid)",
              "at least %d lines" % (2 * per_carrier), n, ok=bool(n and n >= 2 * per_carrier))
        for source in ("log_audit", "journal_audit"):
            before = dict((k, _get(clean, source, "facts", k)) for k in STABLE_FACTS)
            after = dict((k, _get(forged, source, "facts", k)) for k in STABLE_FACTS)
            check("attack changes no startup fact (%s)" % source, before, after)
            new_rules = sorted(set(_rules(forged.get(source))) - set(_rules(clean.get(source))))
            check("attack: the forged records are findings, never facts (%s)" % source, [LATE_STARTUP_RULE], new_rules)
    si = result.get("server_info") or {}
    check("server_info read (every endpoint but /metrics, off without --enable-metrics)", [],
          [e for e in (si.get("errors") or []) if not e.startswith("metrics")])
    check("server_info: SGLang version (the installed package's)", sglang_version, si.get("version"))
    ck = result.get("checkpoint_info") or {}
    auto = "fp8_e4m3" if spec["checkpoint"] == "trap-fp8" else "bfloat16"
    check("checkpoint_info: what auto resolves to", auto, ck.get("kv_cache_dtype_auto"))
    check("checkpoint_info: FP8 KV with unit scales", spec["checkpoint"] == "trap-fp8", ck.get("fp8_kv_with_unit_scales"))
    if spec.get("bench"):
        bench = result.get("bench") or {}
        levels = bench.get("levels") or []
        got = dict((lv.get("concurrency"), "%s/%s ok, %s tok/s" % (lv.get("succeeded"), lv.get("requests"), lv.get("aggregate_output_tok_s")))
                   for lv in levels)
        check("benchmark: C=1 and C=8, every request answered", "C=1 and C=8, all ok", got or bench.get("msg"),
              ok=bench.get("ok") is True and [lv.get("concurrency") for lv in levels] == [1, 8]
              and all(lv.get("succeeded") == lv.get("requests") for lv in levels))
    if spec.get("canary"):
        first, same, drift = result.get("canary_first") or {}, result.get("canary_same") or {}, result.get("canary_drift") or {}
        msg = first.get("msg") or ""
        # failed_when: false keeps the play going, so the module's failure shows as passed=false and its msg
        check("canary: random weights fail, said plainly", "accuracy canary failed: ...",
              msg[:200] if first.get("passed") is False else "passed=%s" % first.get("passed"),
              ok=first.get("passed") is False and msg.startswith("accuracy canary failed:"))
        check("canary: same answers against its own baseline", {"compared": True, "drift": False},
              {"compared": _get(same, "drift", "compared"), "drift": _get(same, "drift", "drift")})
        tampered = sorted((_get(first, "state", "answers") or {"?": 0}).keys())[0]
        check("canary: a changed baseline answer is drift, and fails with fail_on_drift", [tampered],
              _get(drift, "drift", "changed"), ok=_get(drift, "drift", "changed") == [tampered] and drift.get("passed") is False
              and "answers drifted from the last good run: %s" % tampered in (drift.get("msg") or ""))
    return checks


def _short(value):
    """server_info's kv_cache_dtype (a dict in newer releases of the collection) as one cell."""
    if isinstance(value, dict):
        return ", ".join("%s=%s" % (k, value[k]) for k in ("running", "flag", "schedulers", "resolved") if k in value)
    return value


def summary_row(name, spec, result, checks, timing):
    clean = result.get("clean") or {}
    facts = _get(clean, "log_audit", "facts") or {}
    return {"scenario": name, "checkpoint": spec["checkpoint"], "kv_cache_dtype": spec["kv"],
            "env": " ".join("%s=%s" % kv for kv in spec.get("env", {}).items()) or None,
            "expected": "PASS (bf16)" if spec["expect"] == "bf16" else "FAIL (fp8)",
            "guard": None if not clean else "%s (%s)" % ("PASS" if _get(clean, "guard", "passed") else "FAIL", _get(clean, "guard", "verdict")),
            "guard_after_forging": None if not result.get("forged") else "%s (%s)" % (
                "PASS" if _get(result, "forged", "guard", "passed") else "FAIL", _get(result, "forged", "guard", "verdict")),
            "fp8_warning": facts.get("fp8_scale_warning"), "kv_pool": facts.get("kv_dtype_effective"),
            "server_info_kv_cache_dtype": _short(_get(result, "server_info", "kv_cache_dtype")),
            "as_expected": all(c["ok"] for c in checks), "failed_checks": [c["check"] for c in checks if not c["ok"]],
            "timing_s": timing, "about": spec["about"]}


def _cell(value):
    return json.dumps(value)[:200].replace("|", "\\|")


def markdown(env, rows, checks, total_s):
    lines = ["# Real SGLang %s on %s" % (env.get("sglang"), env.get("gpu")), "",
             "Date %s, driver/GPU `%s`, Python %s, torch %s (CUDA %s), transformers %s, ansible-core %s, commit %s. "
             "Whole run %.0f s." % (env.get("date"), env.get("gpu"), env.get("python"), env.get("torch"), env.get("cuda"), env.get("transformers"),
                                    env.get("ansible_core"), env.get("commit") or "?", total_s), "",
             "| scenario | --kv-cache-dtype | expected | guard | after forged requests | FP8 warning | KV pool | "
             "/server_info kv_cache_dtype | ready (s) | as expected |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s%s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["scenario"], r["kv_cache_dtype"], (" " + r["env"]) if r["env"] else "", r["expected"], r["guard"],
            r["guard_after_forging"] or "", r["fp8_warning"], r["kv_pool"], r["server_info_kv_cache_dtype"],
            r["timing_s"].get("ready"), "yes" if r["as_expected"] else "**no**: " + "; ".join(r["failed_checks"])))
    lines += ["", "## Every check", "", "| scenario | check | expected | got | ok |", "|---|---|---|---|---|"]
    for c in checks:
        lines.append("| %s | %s | %s | %s | %s |" % (c["scenario"], c["check"], _cell(c["expected"]), _cell(c["got"]),
                                                     "ok" if c["ok"] else "**FAIL**"))
    lines += ["", "## Timings (s)", "", "| scenario | start to ready | playbook | stop | total |", "|---|---|---|---|---|"]
    for r in rows:
        t = r["timing_s"]
        lines.append("| %s | %s | %s | %s | %s |" % (r["scenario"], t.get("ready"), t.get("playbook"), t.get("stop"), t.get("total")))
    return "\n".join(lines) + "\n"


def combine_runs(runs):
    """verdict-all.{json,md} in OUT: every scenario run on this machine so far (a full run spans several
    commands sent to the GPU machine), the latest run of each scenario."""
    rows, checks, total, env = {}, {}, 0.0, None
    for stamp in sorted(os.listdir(runs)):
        try:
            with open(os.path.join(runs, stamp, "verdict.json")) as fh:
                verdict = json.load(fh)
        except (OSError, ValueError):
            continue
        env = env or verdict["environment"]
        total += verdict["total_s"]
        for row in verdict["scenarios"]:
            rows[row["scenario"]] = row
            checks[row["scenario"]] = [c for c in verdict["checks"] if c["scenario"] == row["scenario"]]
    order = [n for n in SCENARIOS if n in rows]
    merged = {"environment": env, "total_s": round(total, 1), "scenarios": [rows[n] for n in order],
              "checks": [c for n in order for c in checks[n]], "as_expected": all(rows[n]["as_expected"] for n in order)}
    with open(os.path.join(OUT, "verdict-all.json"), "w") as fh:
        json.dump(merged, fh, indent=1)
    with open(os.path.join(OUT, "verdict-all.md"), "w") as fh:
        fh.write(markdown(env, merged["scenarios"], merged["checks"], merged["total_s"]))


def trim_log(src, dst):
    """The log with request echoes (--log-requests: 'Receive: obj=', 'Finish: obj=') cut at TRIM_CHARS characters,
    every other line whole; colour codes dropped, a progress bar kept at its last state."""
    with open(src, "rb") as fh, open(dst, "w") as out:
        for raw in fh:
            line = ANSI.sub("", raw.decode("utf-8", "replace").rstrip("\n").split("\r")[-1])
            if ECHO.search(line) and len(line) > TRIM_CHARS:
                line = "%s [... %d chars cut]" % (line[:TRIM_CHARS], len(line) - TRIM_CHARS)
            out.write(line + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated subset, in this order")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--simulator", action="store_true", help="serve with tests/lab/sglang_sim (tries the harness; no verdict)")
    args = ap.parse_args()
    if args.simulator:
        LAUNCH[:] = [sys.executable, SIMULATOR]
        # the simulator sizes its pools for a large model: give it the share of GPU memory it wants
        SERVER_FLAGS[SERVER_FLAGS.index("--mem-fraction-static") + 1] = "0.85"
    if args.list:
        for name, spec in SCENARIOS.items():
            print("%-16s --kv-cache-dtype %-8s expect %-4s  %s" % (name, spec["kv"], spec["expect"], spec["about"]))
        return 0
    names = [n for n in args.scenarios.split(",") if n]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise SystemExit("unknown scenario(s) %s; known: %s" % (", ".join(unknown), ", ".join(SCENARIOS)))

    t_run = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S")
    base = os.path.join(RG, "runs", stamp)
    ckpt, units = os.path.join(RG, "ckpt"), os.path.join(RG, "units")
    os.makedirs(base)
    os.makedirs(OUT, exist_ok=True)
    env = environment()
    say("environment: %s" % json.dumps(env))
    env["install_s"] = float(os.environ.get("RG_INSTALL_S") or 0)
    env["checkpoints_s"] = make_checkpoints(ckpt)
    bindir = stand_in_bin(os.path.join(RG, "bin"), units)
    rows, all_checks = [], []
    for name in names:
        spec = SCENARIOS[name]
        work = os.path.join(base, name)
        os.makedirs(work)
        server = Server(name, spec, ckpt, work, units)
        t0 = time.time()
        server.start()
        try:
            result, rc, pb_s = playbook(name, spec, server, work, bindir, units)
            for path, fname in (("/server_info", "server_info.json"), ("/get_model_info", "model_info.json"),
                                ("/v1/models", "models.json")):
                with open(os.path.join(work, fname), "wb") as fh:
                    fh.write(fetch_raw(path))
        finally:
            stop_s = server.stop()
        trim_log(server.log, os.path.join(work, "server.trimmed.log"))
        checks = judge(name, spec, result, server.checkpoint, env.get("sglang"), log=server.log)
        ready_at = result.get("ready_at")
        timing = {"ready": round(ready_at - server.started, 1) if ready_at else None, "playbook": pb_s, "stop": stop_s,
                  "total": round(time.time() - t0, 1)}
        row = summary_row(name, spec, result, checks, timing)
        rows.append(row)
        all_checks += checks
        say("%s: guard %s, expected %s, %s (%s)" % (name, row["guard"], row["expected"],
                                                    "as expected" if row["as_expected"] else "NOT as expected: %s" % row["failed_checks"],
                                                    ", ".join("%s %s s" % kv for kv in timing.items())))
    total_s = round(time.time() - t_run, 1)
    verdict = {"environment": env, "total_s": total_s, "scenarios": rows, "checks": all_checks,
               "as_expected": all(r["as_expected"] for r in rows)}
    for fname, text in (("verdict.json", json.dumps(verdict, indent=1)), ("verdict.md", markdown(env, rows, all_checks, total_s))):
        for folder in (base, OUT):
            with open(os.path.join(folder, fname), "w") as fh:
                fh.write(text)
    combine_runs(os.path.join(RG, "runs"))
    with tarfile.open(os.path.join(OUT, "real-sglang.tar.gz"), "w:gz") as tar:
        tar.add(base, arcname="real-sglang-%s" % stamp)
    say("%d scenario(s) in %.0f s: %s" % (len(rows), total_s, "all as expected" if verdict["as_expected"] else "NOT all as expected"))
    return 0 if verdict["as_expected"] else 1


if __name__ == "__main__":
    sys.exit(main())
