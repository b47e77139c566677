# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every parser of plugins/module_utils on mutated real samples and random input: each returns, or raises its own
documented error with a message; nothing else escapes. One target per module_utils file (two where a file parses both
text and structured input); the case counts are printed at the end of the run."""

import io
import json
import pathlib
import re

import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter import gpu_preflight_plan as gpu_preflight_filter
from ansible_collections.llmops.sglang.plugins.filter import worker_url as worker_url_filter
from ansible_collections.llmops.sglang.plugins.module_utils.bench import _chart as bchart
from ansible_collections.llmops.sglang.plugins.module_utils.bench import _client as bclient
from ansible_collections.llmops.sglang.plugins.module_utils.bench import _gate as bgate
from ansible_collections.llmops.sglang.plugins.module_utils.bench import _prompts as bprompts
from ansible_collections.llmops.sglang.plugins.plugin_utils import _benchmark_report as breport
from ansible_collections.llmops.sglang.plugins.module_utils.bench import _serving as bserving
from ansible_collections.llmops.sglang.plugins.module_utils.bench import _stats as bstats
from ansible_collections.llmops.sglang.plugins.module_utils import _canary as cn
from ansible_collections.llmops.sglang.plugins.module_utils import _cmake_plan as cp
from ansible_collections.llmops.sglang.plugins.module_utils import _checkpoint as ck
from ansible_collections.llmops.sglang.plugins.module_utils import _cubin as cu
from ansible_collections.llmops.sglang.plugins.module_utils import _cuda_binary as cb
from ansible_collections.llmops.sglang.plugins.module_utils import _cuda_toolkit as ct
from ansible_collections.llmops.sglang.plugins.module_utils import _fatbin as fb
from ansible_collections.llmops.sglang.plugins.plugin_utils import _gpu_preflight_plan as gpp
from ansible_collections.llmops.sglang.plugins.plugin_utils import _gpu_preflight_rules as gp
from ansible_collections.llmops.sglang.plugins.module_utils import _http
from ansible_collections.llmops.sglang.plugins.module_utils import _journal as jr
from ansible_collections.llmops.sglang.plugins.module_utils import _kv_auto as ka
from ansible_collections.llmops.sglang.plugins.module_utils import _kv_budget as kb
from ansible_collections.llmops.sglang.plugins.module_utils import _kv_guard as kg
from ansible_collections.llmops.sglang.plugins.module_utils import _launch_args as la
from ansible_collections.llmops.sglang.plugins.module_utils import _systemd_exec as se
from ansible_collections.llmops.sglang.plugins.module_utils import _nvidia_smi as smi
from ansible_collections.llmops.sglang.plugins.module_utils import _readiness as rd
from ansible_collections.llmops.sglang.plugins.module_utils import _redact as rdc
from ansible_collections.llmops.sglang.plugins.module_utils import _service_stop as stop
from ansible_collections.llmops.sglang.plugins.plugin_utils import _report_text as rt
from ansible_collections.llmops.sglang.plugins.plugin_utils import _router_plan as rplan
from ansible_collections.llmops.sglang.plugins.plugin_utils import _sglang_runtime_plan as runtime
from ansible_collections.llmops.sglang.plugins.module_utils import _router_workers as rw
from ansible_collections.llmops.sglang.plugins.module_utils import _prometheus as prom
from ansible_collections.llmops.sglang.plugins.module_utils import _server_info as si
from ansible_collections.llmops.sglang.plugins.module_utils import _sglang_args as sa
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log import _log_audit as sl
from ansible_collections.llmops.sglang.plugins.module_utils import _systemd as systemd

from .corpus import (
    CMAKE, CONFIGS, CUOBJDUMP, FIXTURES, GPU_INFO, INDEXES, JOURNAL, KV_LINES, LOGS, METRICS, NVCC, QUANT, ROUTER, SAFETENSORS, SERVER_INFO, SMI,
    SSE, TOOL_OUTPUTS, TOOLKIT)
from .harness import clean, fuzz


# ---- nvidia-smi, nvcc, cuobjdump ----------------------------------------------------------------------

def test_nvidia_smi_outputs(request):
    """Every nvidia-smi, /proc and lspci parser on mutated real outputs of 30+ machines."""
    def check(case):
        text, rc, value = case
        smi.parse_query_csv(text)
        smi.parse_smi_header(text)
        smi.parse_topo(text)
        smi.parse_proc_version(text)
        smi.parse_cmdline_iommu(text)
        smi.parse_lspci_acs(text)
        smi.classify_failure(rc, text, text[:200])
        for token in text.split()[:10] + [value]:
            smi.normalize_compute_cap(token)
            if isinstance(token, str):
                smi.sysfs_bus_id(token)
                smi.compute_cap_int(token)
    fuzz(request, lambda m: (m.text(SMI), m.pick((None, 0, 1, 6, 9, 15, 18, 127, 255, -9, m.number())), m.scalar()), check, 8000)


def test_cuda_toolkit_outputs(request, tmp_path):
    cache = tmp_path / "cache.json"
    samples = NVCC + [json.dumps({"nvcc": "/usr/local/cuda/bin/nvcc", "version": "13.0.88", "mtime": 1,
                                  "archs": {"sm_120a": {"compiles": True, "error_class": None}}})]

    def check(case):
        text, arch = case
        ct.parse_nvcc_version(text)
        ct.parse_arch_list(text, "compute_")
        ct.parse_arch_list(text, "sm_")
        ct.classify_compile_error(text)
        ct.version_tuple(arch)
        clean(lambda: ct.validate_arch(arch), ValueError)
        cache.write_text(text, errors="surrogatepass")
        ct.load_cache(str(cache))
    fuzz(request, lambda m: (m.text(samples), m.pick(("sm_120a", "sm_90a", "sm_100f", m.junk(), m.scalar()))), check, 5000)


def test_cmake_plan_outputs(request):
    """compile_commands.json, build.ninja and the configure log of real fixture configures, mutated."""
    def check(text):
        units = clean(lambda: cp.parse_compile_commands(text), cp.CMakePlanError)
        summary = cp.summarize(units or [], cp.parse_link_outputs(text))
        cp.check(summary, ["sm_120a"], True, cp.unused_defines(text), restrict_to=["120f"])
    fuzz(request, lambda m: m.text(CMAKE), check, 3000)


def test_cuda_binary_outputs(request):
    def check(case):
        kind, rc, out, err, archs = case
        listing = clean(lambda: cb.parse_listing(kind, rc, out, err), cb.CudaBinaryError)
        headers = cb.parse_fatbin_headers(out)
        if listing:
            cubins = listing[1]
            cb.needs_header_pass(cubins)
            cb.refine_cubin_archs(cubins, headers)
            cb.sorted_archs(c["arch"] for c in cubins if c["arch"])
        cb.parse_version(out)
        required = []
        for arch in archs:
            norm = clean(lambda: cb.normalize_arch(arch), cb.CudaBinaryError)
            if norm is not None:
                required.append(norm)
                cb.torch_arch(norm)
                cb.cmake_arch(norm)
        cb.missing_archs(required, [a for a in re.findall(r"sm_\d+[a-z]?", out) if cb.split_arch(a)], accept_family=True)
        cb.is_shared_library(out[:100])
    # rc is what the runner returns: an int
    fuzz(request, lambda m: (m.pick(("elf", "ptx")), m.pick((0, 1, 255, -1, m.r.randrange(-2 ** 31, 2 ** 31))), m.text(CUOBJDUMP),
                             m.text(CUOBJDUMP),
                             [m.pick(("sm_120a", "120a", "12.0a", "sm_100f", m.junk(), m.scalar())) for _i in range(3)]), check, 8000)


FATBIN_LIBRARY = (FIXTURES / "fatbin" / "libfatbin_mix.so").read_bytes()


def _mutated_library(m):
    """The real library with a few fields overwritten (ELF header, section table, fatbin headers), maybe cut short."""
    data = bytearray(FATBIN_LIBRARY)
    shoff = int.from_bytes(data[0x28:0x30], "little")
    fatbin = FATBIN_LIBRARY.index(b"\x50\xed\x55\xba")
    for _i in range(m.r.randrange(1, 4)):
        base = m.pick((0, shoff, fatbin, fatbin + 16, m.r.randrange(len(data))))
        at = min(len(data) - 1, base + m.r.randrange(0, 80 if base else 64))
        width = m.pick((1, 2, 4, 8))
        value = m.pick((0, 1, 0xFF, 0xFFFF, 2 ** 31, 2 ** 32 - 1, 2 ** 63, 2 ** 64 - 1, m.r.randrange(2 ** 64)))
        data[at:at + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
    if m.chance(5):
        del data[m.r.randrange(len(data)):]
    return bytes(data)


def test_fatbin_headers(request, tmp_path):
    """The fatbin reader on a real CUDA library with corrupted headers: entries or FatbinError, bounded."""
    path = tmp_path / "libfuzz.so"

    def check(data):
        path.write_bytes(data)
        found = clean(lambda: fb.read_entries(str(path)), fb.FatbinError)
        if found:
            assert len(found[1]) <= fb.MAX_ENTRIES
            with open(str(path), "rb") as handle:
                for entry in found[1]:
                    assert entry["offset"] + entry["size"] <= len(data)
                    payload = clean(lambda: fb.read_payload(handle, entry["offset"]), fb.FatbinError)
                    if payload:
                        assert len(payload[1]) <= entry["size"] and payload[2] <= fb.MAX_CUBIN_BYTES
    fuzz(request, _mutated_library, check, 1500)


# ---- kernel symbols, names and LZ4 blocks of a real library (tests/fixtures/fatbin/libkernel_names.so) -------------

def _kernel_samples():
    """The plain cubins and the LZ4 block of the fixture, as stored, and its cuobjdump symbol dump."""
    library = str(FIXTURES / "fatbin" / "libkernel_names.so")
    cubins, blocks = [], []
    with open(library, "rb") as handle:
        for entry in fb.read_entries(library)[1]:
            method, data, size = fb.read_payload(handle, entry["offset"])
            if entry["kind"] == "elf" and method is None:
                cubins.append(data)
            elif method == "lz4":
                blocks.append((data, size))
    return cubins, blocks


KERNEL_CUBINS, LZ4_BLOCKS = _kernel_samples()
KERNEL_NAMES = (FIXTURES / "fatbin" / "sgl_kernel_0.4.10_sm120a_kernels.txt").read_text().split()
SYMBOL_DUMPS = [(FIXTURES / "fatbin" / name).read_text()
                for name in ("libkernel_names.dump-elf-symbols.out", "libfatbin_mix.dump-elf-symbols.out")]


def _mutated_bytes(m, data, fields=4):
    data = bytearray(data)
    for _i in range(m.r.randrange(1, fields + 1)):
        at = m.r.randrange(len(data))
        width = m.pick((1, 2, 4, 8))
        value = m.pick((0, 1, 0x10, 0xFF, 0xFFFF, 2 ** 31, 2 ** 32 - 1, 2 ** 64 - 1, m.r.randrange(2 ** 64)))
        data[at:at + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
    if m.chance(5):
        del data[m.r.randrange(len(data)):]
    return bytes(data)


def test_cubin_symbols(request):
    """The kernel reader on real cubins with a few bytes overwritten (ELF header, section and symbol tables, names):
    kernels or CubinError; every kernel name an identifier list made of its own substrings."""
    def check(data):
        found = clean(lambda: cu.kernels(data), cu.CubinError)
        for name, size in found or []:
            assert isinstance(name, str) and 0 <= size < 2 ** 64
            assert all(word in name for word in cu.identifiers(name))
    fuzz(request, lambda m: _mutated_bytes(m, m.pick(KERNEL_CUBINS)), check, 1500)


def _mangled(m):
    name = m.pick(KERNEL_NAMES)
    if m.chance(3):
        return "_Z" + m.junk()
    chars = list(name)
    for _i in range(m.r.randrange(1, 5)):
        at = m.r.randrange(len(chars))
        chars[at:at + m.r.randrange(3)] = m.pick(("9", "99999999", "L", "E", "S_", "_", "Li1E", "N", m.junk()))
    return "".join(chars)


def test_kernel_identifiers(request):
    """identifiers/readable on real mangled names with edits and on junk: substrings of the name, never an error."""
    def check(name):
        words = cu.identifiers(name)
        assert all(word and word in name for word in words)
        assert cu.readable(name) == "::".join(words)
    fuzz(request, _mangled, check, 3000)


def test_lz4_blocks(request):
    """The LZ4 reader on the fixture's real block with bytes overwritten and sizes that lie: exactly the declared size
    or FatbinError, never more."""
    def check(case):
        data, size = case
        out = clean(lambda: fb.lz4_block(data, size), fb.FatbinError)
        assert out is None or len(out) == size
    fuzz(request, lambda m: (_mutated_bytes(m, m.pick(LZ4_BLOCKS)[0]) if m.r.randrange(4) else m.pick(LZ4_BLOCKS)[0],
                             m.pick((m.pick(LZ4_BLOCKS)[1], m.r.randrange(0, 20000), 0))), check, 1500)


def test_elf_symbol_dumps(request):
    """parse_elf_symbols on cuobjdump --dump-elf-symbols outputs with line edits: a list of (arch, names)."""
    def check(text):
        for arch, names in cb.parse_elf_symbols(text):
            assert isinstance(arch, str) and all(isinstance(n, str) and n for n in names)
    fuzz(request, lambda m: m.text(SYMBOL_DUMPS), check, 2000)


# ---- KV budget, canary, benchmark ------------------------------------------------------------------

ARCHS = []
for _config in CONFIGS:
    try:
        ARCHS.append(ck.parse_architecture(_config))
    except ck.CheckpointError:
        pass
ARCH_KEYS = sorted(set(k for a in ARCHS for k in a))


def _kv_case(m):
    arch = dict(m.pick(ARCHS))
    for _i in range(m.r.randrange(3)):
        arch[m.pick(ARCH_KEYS)] = m.value()
    if m.chance(3):
        memory = (m.number(), m.number(), m.number())
    elif m.chance(2):
        memory = (m.r.uniform(0, 200), m.r.uniform(0, 200), m.r.random())
    else:
        memory = (None, None, None)
    pool = m.pick((None, lambda: m.text(KV_LINES, 1), lambda: dict((m.pick(("tokens", "k_gb", "kv_gb", "layers", "dtype")),
                                                                   m.scalar()) for _i in range(3))))
    return dict(
        arch=arch, tp_size=m.pick((1, 2, 4, 8, m.number(), m.junk())),
        kv_cache_dtype=m.pick(sorted(kb.KV_DTYPE_BYTES) + ["auto", "nvfp4", m.junk(), m.scalar()]),
        auto_dtype=m.pick(("bfloat16", "fp8_e4m3", None, m.junk())),
        free_memory_gib=memory[0], total_memory_gib=memory[1], mem_fraction_static=memory[2],
        context_lengths=m.pick((None, [m.number() for _i in range(m.r.randrange(3))], [32768, 131072])),
        mamba_full_memory_ratio=m.pick((0.9, m.number())), max_mamba_cache_size=m.pick((None, m.number())),
        page_size=m.pick((1, 16, m.number())), observed_pool=pool() if callable(pool) else pool)


def test_kv_budget(request):
    def check(case):
        if isinstance(case["observed_pool"], str):
            kb.parse_kv_pool_line(case["observed_pool"])
        result = clean(lambda: kb.plan(**case), kb.BudgetError)
        if result is not None:
            json.dumps(result, allow_nan=False)  # every number finite: the module's answer is plain JSON
    fuzz(request, _kv_case, check, 12000)


CANARY_ITEMS, _W = cn.build_items(["needle", "coding"], contexts=[256], depths=[0.5])
CANARY_STATE = {"version": 1, "hash": "0" * 64, "model": "m", "answers": {"needle-256-0.50": "K7QX-4M2D-9PLA", "coding-popcount": "7"}}
ANSWERS = ["K7QX-4M2D-9PLA", "```python\n[25, 49, 64]\n```", "The answer is 'eht-tac-tas-tam'.", "(-4, 3)", "f(15) returns 610",
           "[('a', 12), ('b', 15), ('c', 6)]", "((((((((((1))))))))))", "[" * 200,
           "```python\n" + "x" * 60000]  # an unclosed fence the size of a graded answer


def test_canary_answers_and_state(request):
    def check(case):
        answer, previous, run_eval, build = case
        for item in CANARY_ITEMS:
            cn.grade(item, answer)
        answers = dict((it["id"], answer if n % 2 else None) for n, it in enumerate(CANARY_ITEMS))
        cn.compare(previous, answers)
        cn.parse_run_eval(run_eval)
        clean(lambda: cn.build_items(*build), cn.CanaryError)

    def small(m):
        return m.pick((m.r.randrange(-5, 2048), m.number(), m.junk(), None))

    fuzz(request, lambda m: (m.text(ANSWERS), m.json([CANARY_STATE]), m.text(TOOL_OUTPUTS),
                             ([m.pick(("needle", "coding", "x", "")) for _i in range(m.r.randrange(3))], 0,
                              [small(m) for _i in range(m.r.randrange(3))], [small(m) for _i in range(m.r.randrange(3))],
                              # the server's context length comes from discover(): an int or None
                              m.pick((4.0, m.r.uniform(0.01, 8))), m.pick((None, m.r.randrange(-5, 10 ** 6))))), check, 4000)


def test_benchmark_bench_serving_and_gate(request):
    def check(case):
        text, baseline, fraction, concurrency = case
        parsed = bserving.parse_bench_serving(text)
        levels = [bserving.bench_serving_level(parsed, concurrency, 10)] if parsed is not None else []
        base = clean(lambda: bgate.normalize_baseline(baseline), bprompts.BenchmarkError)
        gate = clean(lambda: bgate.evaluate_gate(levels, baseline, fraction), bprompts.BenchmarkError)
        if gate is not None:
            bgate.summary_line(levels, gate)
        bchart.render_chart(levels, base or None, 0.9)

    def baseline(m):
        return dict((m.pick((str(m.r.randrange(64)), m.junk())), m.number()) for _i in range(m.r.randrange(3)))

    fuzz(request, lambda m: (m.text(TOOL_OUTPUTS), m.pick((baseline, lambda m: m.value()))(m), m.pick((0.9, m.number())),
                             m.r.randrange(1, 512)), check, 8000)


class _Response(object):
    """What urllib's opener returns, over captured bytes: stream_chat reads them through its real parser."""

    status = 200
    headers = {"Content-Type": "text/event-stream"}

    def __init__(self, data):
        self._stream = io.BytesIO(data)

    def readline(self, limit=-1):
        return self._stream.readline(limit)

    def close(self):
        pass


def test_benchmark_chat_stream(request, monkeypatch):
    """stream_chat's event-stream parser on mutated SGLang chat streams (only the socket is replaced)."""
    def check(data):
        monkeypatch.setattr(_http, "opener", lambda *a, **k: type("Opener", (), {"open": lambda self, req, timeout: _Response(data)})())
        res = bclient.stream_chat("http://127.0.0.1:30000", {"messages": []}, timeout=30, keep_text=True)
        assert res["ok"] or res["error"]["kind"] in bclient.ERROR_KINDS, res["error"]
        bstats.summarize_level(1, [res], 1.0)
    fuzz(request, lambda m: m.data(SSE), check, 6000)


# ---- router, preflight, URLs ---------------------------------------------------------------------------

def test_router_workers(request):
    def check(case):
        listing, url, bind, port, metrics = case
        workers = clean(lambda: rw.workers_of(listing, "http://r:1"), rw.RouterError)
        if clean(lambda: rw.url_key(url), si.ServerInfoError) is not None and workers is not None:
            rw.matching(workers, url)
        _http.worker_url(bind, port, "10.0.0.11")
        worker_url_filter.FilterModule().filters()["worker_url"](bind, port, "gpu-01")
        rw.in_flight(prom.parse_prometheus(metrics)["metrics"])
    fuzz(request, lambda m: (m.json(ROUTER), m.pick(("http://127.0.0.1:30000", "http://[fd00::11]:30000", "HTTP://LOCALHOST:1/",
                                                     m.junk(), "http://%s:%s" % (m.junk(), m.scalar()))),
                             m.pick((None, "::", "0.0.0.0", "fd00::1", m.junk())), m.pick((30000, m.number(), m.junk())),
                             m.text(METRICS)), check, 8000)


def _preflight_case(m):
    expectations = m.pick((None, lambda: dict((m.pick(sorted(gp.DEFAULT_EXPECTATIONS) + ["x"]), m.value())
                                              for _i in range(m.r.randrange(4))), m.value))
    waivers = m.pick((None, lambda: [m.pick(({"rule": m.pick(list(gp.RULES) + [m.junk()]), "reason": m.junk()}, m.value()))
                                     for _i in range(m.r.randrange(3))], m.value))
    smoke = m.pick((None, lambda: {"rc": m.scalar(), "stdout": m.junk()}, m.value))
    # gpu_info and toolkit are results of the collection's modules (shape fixed, values from the host); the rest is
    # whatever a user puts in the role's variables
    return (m.json(GPU_INFO, leaves_only=True), m.json(TOOLKIT, leaves_only=True) if m.chance(2) else None,
            expectations() if callable(expectations) else expectations, waivers() if callable(waivers) else waivers,
            smoke() if callable(smoke) else smoke)


def test_gpu_preflight(request):
    def check(case):
        result = clean(lambda: gp.evaluate(*case), gp.PreflightError)
        if result is not None:
            gp.render_table(result["checks"])
    fuzz(request, _preflight_case, check, 4000)


def test_gpu_preflight_role(request):
    """The gpu_preflight role's report and smoke binary on mutated facts and settings (templated strings included)."""
    plan = gpu_preflight_filter.FilterModule().filters()["gpu_preflight_plan"]
    defaults = yaml.safe_load((pathlib.Path(__file__).resolve().parents[3] / "roles/gpu_preflight/defaults/main.yml").read_text())

    def check(case):
        gpu, toolkit, settings, smoke = case
        out = clean(lambda: plan(settings, "report", gpu, toolkit, smoke, "h"), AnsibleFilterError)
        if out is not None:
            assert out["stamp"]["passed"] == out["result"]["passed"] and list(out["stats"]) == ["h"]
        clean(lambda: gpp.smoke_binary(settings, gpu, toolkit, "src"), gp.PreflightError)

    def settings(m):
        # every setting the role hands over, a few of them mutated (or, now and then, one left out)
        out = dict((name, m.value() if m.chance(4) else defaults[name]) for name in gpp.SETTINGS)
        if m.chance(8):
            out.pop(m.pick(gpp.SETTINGS))
        return out

    fuzz(request, lambda m: (m.json(GPU_INFO, leaves_only=True), m.json(TOOLKIT, leaves_only=True) if m.chance(2) else None,
                             m.pick((settings, lambda m: m.value()))(m), m.pick((None, {"rc": 0, "stdout": m.junk()}))), check, 3000)


def test_benchmark_role_record(request, tmp_path):
    """The benchmark role's baseline choice, options and record on mutated settings, results, history and state files."""
    (tmp_path / "h").mkdir()
    history, state = tmp_path / "h" / "history.jsonl", tmp_path / "h" / "canary-state.json"

    def check(case):
        settings, profiles, result, canary, history_text, state_text = case
        history.write_text(history_text, errors="surrogatepass")
        state.write_text(state_text, errors="surrogatepass")
        if isinstance(settings, dict):
            settings["benchmark_report_dir"] = str(tmp_path)
        clean(lambda: breport.choose_baseline(settings, profiles), bprompts.BenchmarkError)
        clean(lambda: breport.module_options(settings, "h", m_baseline(profiles)), bprompts.BenchmarkError)
        record = clean(lambda: breport.run_record(settings, result, canary, "h"), bprompts.BenchmarkError)
        if record is not None:
            json.dumps(record["report"], default=repr)

    def m_baseline(profiles):
        return profiles if isinstance(profiles, dict) else None

    def settings(m):
        names = ["benchmark_" + n for n in ("baseline", "profile", "dataset", "canary", "fail", "render_png", "trend_runs", "url",
                                            "api_key", "num_requests", "run_eval", "report_dir")]
        return dict((m.pick(names), m.value()) for _i in range(m.r.randrange(6)))

    def history_text(m):
        return m.pick((lambda: "\n".join(json.dumps(m.value()) for _i in range(m.r.randrange(4))), m.junk))()

    fuzz(request, lambda m: (m.pick((settings, lambda m: m.value()))(m),
                             m.pick(({"profiles": {"p": {"dataset": m.pick(("random", m.value())), "output_tok_s": m.value()}}},
                                     m.value())),
                             m.pick(({"levels": [m.value()], "gate": m.value(), "summary": m.junk()}, m.value(), {})),
                             m.pick((None, {"passed": m.value(), "summary": m.junk(), "msg": m.value()}, m.value())),
                             history_text(m), m.pick(('{"version": 1}', m.junk(), ""))), check, 3000)


URLS = ["http://127.0.0.1:30000", "https://[fd00::11]:30000/v1/", "http://gpu-01.example:8000", "http://[::1]:30000"]


def test_http_urls(request):
    def check(case):
        url, host, port = case
        parsed = clean(lambda: _http.parse_base_url(url), _http.UrlError)
        if parsed is not None:
            assert parsed[0].startswith(("http://", "https://")) and 1 <= parsed[2] <= 65535
            assert _http.parse_base_url(parsed[0]) == parsed  # a parsed URL parses to itself
        _http.host_url(host, port)
        _http.status_failure(port if isinstance(port, int) else 500, "http://h:1/x", str(url).encode("utf-8", "replace"), "sk-x")

    def url(m):
        scheme = m.pick(("http", "https", "ftp", ""))
        return m.pick((m.text(URLS), m.junk(), m.scalar(), "%s://%s:%s%s" % (scheme, m.junk(), m.scalar(), m.junk())))

    fuzz(request, lambda m: (url(m), m.pick(("fd00::11", "10.0.0.1", m.junk())), m.pick((30000, m.number(), m.junk()))), check,
         12000)


# ---- files owned elsewhere: only their public functions -----------------------------------------------

SERVER_ANSWERS = [json.dumps(a) for a in SERVER_INFO] or ['{"kv_cache_dtype": "auto", "internal_states": [{}]}']


def test_server_info_answers(request):
    """_server_info's JSON and Prometheus parsers on mutated real /server_info answers and metrics."""
    def check(case):
        body, metrics, line = case
        data = clean(lambda: si.parse_json_object(body, "http://h:1/server_info", "sk-x"), si.FetchError)
        if data is not None:
            si.kv_summary(si.clean(data, "sk-x"))
        prom.parse_prometheus(metrics)
        clean(lambda: prom.parse_sample(line), ValueError)
        clean(lambda: si.normalize_url(line), si.ServerInfoError)
    fuzz(request, lambda m: (m.pick((lambda: m.data(SERVER_ANSWERS, 400), lambda: json.dumps(m.json(SERVER_INFO or [{}])).encode(),
                                     m.deep_json))(), m.text(METRICS), m.text(METRICS, 1)), check, 2000)


def test_sglang_log_audit(request):
    """The log audit on windows of mutated real SGLang logs (forged request lines and NUL bytes included)."""
    fuzz(request, lambda m: m.data(LOGS, 60), lambda data: json.dumps(sl.audit_bytes(data)), 2500)


_SERVED = [log for log in LOGS if b"Application startup complete" in log]
_STARTUP_FACTS = ("kv_cache_dtype_configured", "model_path", "tp_size", "kv_dtype_effective", "kv_pools", "max_total_num_tokens",
                  "fp8_scale_warning", "mamba_pool", "server_args_format", "starts")


def test_sglang_log_audit_after_the_acceptance_point(request):
    """Mutated real lines (forged startup records among them) written after a real log's acceptance point, as a client
    could make SGLang write them: the audit never raises and the startup facts stay those of the real start."""
    def check(case):
        log, tail = case
        clean_facts = sl.audit_bytes(log)["facts"]
        facts = sl.audit_bytes(log + b"\n" + tail)["facts"]
        assert dict((k, facts[k]) for k in _STARTUP_FACTS) == dict((k, clean_facts[k]) for k in _STARTUP_FACTS)
    fuzz(request, lambda m: (m.pick(_SERVED), m.data(LOGS, 40)), check, 400)


def test_sglang_log_rules_and_waivers(request):
    patterns = ("CUDA out of memory", r"KV Cache is allocated\. #tokens: (\d+)", "(", "[", "(?P<x>a)(?P<x>b)", "\\", "x" * 3000,
                "(" * 200 + ")" * 200)

    # what log_audit's argument spec lets through: lists of dicts with these keys, string values (or null)
    def rule(m):
        spec = {"id": m.pick(("cuda_oom", "fp8_kv_no_scales", m.junk()))}
        for key, values in (("severity", ("error", "warning", "info")), ("pattern", patterns), ("scope", ("line", "message")),
                            ("description", ()), ("fix", ())):
            if m.chance(2):
                spec[key] = m.pick(values + (m.junk(), None))
        return spec

    def check(case):
        rules, allow = case
        clean(lambda: sl.audit_bytes(LOGS[0][:2000], rules=rules, allow=allow), sl.LogAuditError)
    fuzz(request, lambda m: (m.pick((None, [rule(m) for _i in range(m.r.randrange(3))])),
                             m.pick((None, [{"rule": m.pick(("cuda_oom", m.junk())), "reason": m.junk()} for _i in range(2)]))),
         check, 1000)


SHOW = ["ActiveState=activating\nSubState=start\nResult=success\nNRestarts=0\nMainPID=4242\nExecMainStatus=0\n"
        "InvocationID=0f1c2e9a7b5d4c3e8f6a1b2c3d4e5f60\nTimeoutStartUSec=45min\n", "1min 30s", "500ms", "infinity",
        "sglang-qwen.service", "http://127.0.0.1:30000/health_generate"]


def test_readiness_parsers(request):
    def check(case):
        text, argv, data = case
        clean(lambda: rd.check_unit_name(text), rd.UnitError)
        rd.mask_text(text)
        rdc.redact_argv(argv)
        rd.clean_line(text)
        systemd.parse_show(text)
        stop.parse_timespan(text)
    fuzz(request, lambda m: (m.text(SHOW + LOGS, 40), [m.pick(("--api-key", "--hf-token=x", "--api-k", "sk-1", m.junk()))
                                                       for _i in range(m.r.randrange(6))], m.data(LOGS, 20)), check, 3000)


UNIT_REQUIRE = jr.unit_output("journalctl", "jm-record.service", "71476cfdbad141eb89a82e1fa7cc8e24")[1]
PID1_REQUIRE = jr.pid1_messages("journalctl", "71476cfdbad141eb89a82e1fa7cc8e24")[1]


def test_journal_reader(request):
    """journalctl -o json output made of mutated real entries (values of other types, MESSAGE as bytes, arrays, nested,
    missing fields), random lines and bytes, fed in chunks cut anywhere: the reader keeps bounded state and never raises."""
    def build(m):
        lines = []
        for _i in range(m.r.randrange(12)):
            if m.chance(6):
                lines.append(m.data(LOGS, 3))
            else:
                lines.append(json.dumps(m.json(JOURNAL), ensure_ascii=m.chance(2)).encode("utf-8", "surrogatepass"))
        data = b"\n".join(lines) + (b"\n" if m.chance(2) else b"")
        cuts = sorted(m.r.randrange(len(data) + 1) for _i in range(m.r.randrange(5)))
        return data, cuts, m.pick((64, 4096, jr.MAX_ENTRY_BYTES)), m.pick((UNIT_REQUIRE, PID1_REQUIRE))

    def check(case):
        data, cuts, max_entry, require = case
        got = []
        reader = jr.JournalReader(got.append, require, max_entry_bytes=max_entry, batch_bytes=256)
        last = 0
        for cut in cuts + [len(data)]:
            reader.feed(data[last:cut])
            last = cut
        reader.finish()
        stats = reader.stats()
        assert stats["kept"] + stats["continuations"] + stats["malformed"] + stats["no_message"] + sum(stats["mismatched"].values()) \
            + stats["oversized"] == stats["entries"]
        assert sum(chunk.count(b"\n") for chunk in got) >= stats["kept"]
        assert reader.cursor is None or isinstance(reader.cursor, str)
        jr.pid1_text(data, PID1_REQUIRE)
    fuzz(request, build, check, 3000)


def test_readiness_url_port(request):
    """Once http://[::1 raised urllib's ValueError out of sglang_wait_ready; now the one URL rule names the fix."""
    fuzz(request, lambda m: m.pick((m.text(URLS), m.junk(), "http://%s:%s/health_generate" % (m.junk(), m.scalar()))),
         lambda url: clean(lambda: rd.url_port(url), _http.UrlError), 2000)


def test_checkpoint_configs(request):
    """_checkpoint on mutated real config.json / hf_quant_config.json documents (in memory)."""
    def check(case):
        config, quant, names = case
        ck.normalize_model_dtype(config.get("torch_dtype") if isinstance(config, dict) else config)
        clean(lambda: ck.describe_config(config, quant), ck.CheckpointError)
        clean(lambda: ck.parse_quant_config(quant, "hf_quant_config.json"), ck.CheckpointError)
        ck.kv_scale_tensors(names)
    fuzz(request, lambda m: (m.json(CONFIGS), m.json(QUANT) if m.chance(2) else None,
                             [m.pick(("model.layers.3.self_attn.k_scale", "k_proj.k_scale", m.junk())) for _i in range(3)]), check, 6000)


def test_kv_auto_resolution(request):
    """_kv_auto.resolve (what --kv-cache-dtype auto becomes) on mutated real configs and GPUs: a refusal is part of its
    answer, a GPU that is no compute capability a ValueError naming the form."""
    def check(case):
        config, quant, gpu = case
        if isinstance(config, dict):  # resolve takes a parsed config.json: the checkpoint reader refuses anything else
            clean(lambda: json.dumps(ka.resolve(config, quant if isinstance(quant, dict) else None, gpu=gpu)), ValueError)
    gpus = (None, "9.0", "10.0", "12.0", 80, {"compute_capability": "12.0", "count": 8}, {"gpus": []})
    fuzz(request, lambda m: (m.json(CONFIGS), m.json(QUANT) if m.chance(2) else None,
                             m.pick(gpus + (m.junk(), {"gpus": [{"compute_capability": m.junk()}]}))), check, 5000)


def test_checkpoint_files(request, tmp_path):
    """_checkpoint's file readers on mutated real files: config.json, the index, safetensors shards."""
    configs = [json.dumps(c) for c in CONFIGS]
    indexes = [json.dumps(i) for i in INDEXES]

    def check(case):
        config, index, shard = case
        (tmp_path / "config.json").write_bytes(config)
        (tmp_path / "model.safetensors.index.json").write_bytes(index)
        (tmp_path / "model-00001-of-00004.safetensors").write_bytes(shard)
        clean(lambda: ck.load_json(str(tmp_path / "config.json")), ck.CheckpointError)
        clean(lambda: ck.read_safetensors_header(str(tmp_path / "model-00001-of-00004.safetensors")), ck.CheckpointError)
        clean(lambda: ck.inspect_checkpoint(str(tmp_path)), ck.CheckpointError)
    fuzz(request, lambda m: (m.pick((lambda: m.data(configs, 400), lambda: json.dumps(m.json(CONFIGS)).encode(), m.deep_json))(),
                             m.pick((lambda: m.data(indexes), m.deep_json))(), m.data(SAFETENSORS)), check, 1500)


KV_ARGV = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/qwen", "--tp-size", "8", "--kv-cache-dtype",
           "fp8_e4m3", "--api-key", "sk-fuzz-1"]
EXECSTART = ["{ path=/opt/sglang/bin/python ; argv[]=/opt/sglang/bin/python -m sglang.launch_server --model-path /m "
             "--kv-cache-dtype bf16 ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; "
             "status=0/0 }", "ExecStart=/usr/bin/python3 -m sglang.launch_server --kv-cache-dtype fp8_e4m3"]
GUARD_KEYS = ("expected", "waiver_reason", "min_signals", "tp_size", "argv", "argv_source", "argv_error", "log_facts", "checkpoint",
              "checkpoint_error", "server_info", "server_error", "log_source")


def _guard_case(m):
    words = [m.pick(KV_ARGV + [m.junk()]) for _i in range(m.r.randrange(12))]
    inputs = {}
    for key in GUARD_KEYS:
        if m.chance(2):
            inputs[key] = m.pick((m.scalar(), m.value(), words, "bf16", "fp8_e4m3", "file", 8, m.json(SERVER_INFO or [{}])))
    return words, m.text(EXECSTART), inputs


def test_kv_guard(request):
    """_kv_guard's argv parser and its verdict, and _systemd_exec's ExecStart= reader and writer, on mutated inputs:
    whatever quote writes reads back as the same words."""
    def check(case):
        words, text, inputs = case
        kg.classify_dtype(text)
        la.parse_launch_argv(words)
        kg.redact_argv(words, "sk-fuzz-1")
        kg.served_model(words, inputs.get("server_info"))
        se.shown_commands(text)
        commands = clean(lambda: se.unit_commands("[Service]\nExecStart=" + text, "sglang.service"), se.ExecSyntaxError)
        la.select_launch_command([c["argv"] for c in commands or []])
        line = clean(lambda: se.command_line(words, breaks={2}), se.ExecSyntaxError) if words else None
        if line is not None:
            assert [c["argv"] for c in se.unit_commands("[Service]\nExecStart=" + line)] == [[str(w) for w in words]]
        clean(lambda: kg.evaluate(inputs), kg.GuardError)
    fuzz(request, _guard_case, check, 3000)


CHECKER_ANSWER = {"errors": [{"kind": "invalid_choice", "flag": "--kv-cache-dtype", "option": "--kv-cache-dtype", "value": "fp8",
                              "problem": "argument --kv-cache-dtype: invalid choice: 'fp8' (choose from 'auto', 'fp8_e4m3')",
                              "choices": ["auto", "fp8_e4m3", "fp8_e5m2", "bf16"]},
                             {"kind": "unrecognized", "flag": "--enable-dp-attn", "value": None,
                              "close_matches": ["--enable-dp-attention"]}],
                  "parsed": {"model_path": "/m", "tp_size": 8}, "deprecated": [], "secret_positions": [[6, 7]],
                  "sglang_version": "0.5.23", "python_version": "3.11.7"}
ARGS_WORDS = ("--model-path", "/m", "--api-key", "sk-1", "--api-k", "--hf-token=hf_x", "--tp", "8", "--kv-cache-dtype", "fp8")


def test_sglang_args(request):
    """_sglang_args: secret flags, masking and the interpretation of the checker's answer."""
    def check(case):
        args, answer = case
        secrets = sa.secret_values(args, sa.secret_positions(args))
        sa.mask({"args": args, "text": " ".join(args)}, secrets)
        for token in args:
            sa.split_flag(token)
            sa.is_secret_flag(token)
            sa.looks_like_flag(token)
        result = clean(lambda: sa.interpret(answer, args), sa.SglangArgsError)
        if result is not None:
            sa.format_errors(result[0])
    # the answer is what the collection's own checker prints: its shape is fixed, its strings come from SGLang
    fuzz(request, lambda m: ([m.pick(ARGS_WORDS + (m.junk(),)) for _i in range(m.r.randrange(10))],
                             m.json([CHECKER_ANSWER], leaves_only=True)), check, 3000)


# ---- escaping for reports, printed forms of secrets, refused paths and flags ------------------------------------

RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def test_report_text_escapers(request):
    """_report_text on mutated real log lines and hostile values: never raises; nothing raw in the output; every pipe
    of a Markdown text escaped; a code span's or block's fence longer than any backtick run inside."""
    def check(value):
        for lines in (False, True):
            assert RAW_CONTROL.search(rt.plain(value, lines).replace("\n", "") if lines else rt.plain(value)) is None
        text = rt.markdown(value)
        assert RAW_CONTROL.search(text) is None and "\n" not in text
        assert not re.search(r"(?<!\\)(?:\\\\)*\|", text)  # every | preceded by an odd run of backslashes
        for kind in ("code", "block"):
            out = rt.markdown(value, kind)
            fence = re.match(r"`*", out).group(0)
            assert not fence or max([0] + [len(r) for r in re.findall("`+", out[len(fence):len(out) - len(fence)])]) < len(fence)
    fuzz(request, lambda m: m.pick((lambda: m.text(KV_LINES, 3), m.junk, m.scalar, m.value))(), check, 6000)


def test_secret_forms_paths_and_router_flags(request):
    """_redact.printed_forms and masking with a known secret; _sglang_runtime_plan.system_dir; _router_plan.secret_flags."""
    def check(case):
        secret, text, words = case
        if isinstance(secret, str):
            forms = rdc.printed_forms(secret)
            assert secret in forms
            rdc.redact_text(text + " " + repr(secret) + " " + json.dumps(secret), [secret])
        normal = runtime.system_dir(text)
        assert normal is None or normal in runtime.SYSTEM_DIRS or (normal + "/").startswith(runtime.PSEUDO_FS)
        flags = rplan.secret_flags(words)
        assert all(isinstance(f, str) for f in flags)
    fuzz(request, lambda m: (m.pick((m.junk(), "sk-lab\t1", "sk\u00a0x", m.scalar())),
                             m.pick(("/tmp", "//tmp/", "/models/../root", "/proc/1", m.junk(), m.text(KV_LINES, 1))),
                             m.pick(([m.pick(ARGS_WORDS + ("--ap", "--ap=x", "--api-k", m.junk())) for _i in range(m.r.randrange(6))],
                                     m.scalar()))), check, 3000)
