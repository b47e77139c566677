# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every module's main() with fuzzed arguments, run the way Ansible runs it (arguments in, JSON out): the answer is a
result or a failure with a message, never a traceback.

The arguments come from each module's own argument_spec (read from main()), each option drawn from its type's values
(good ones, wrong types, huge and non-finite numbers, hostile text) and from real samples for the options that take
documents (configs, checkpoints, logs, URLs). Nothing leaves the test: no program runs (every spawn is "not found"),
every connection is refused, and a module that reaches a wait loop after handling its arguments ends the case there.
"""

import json
import os
import pathlib
import shutil

import pytest
from ansible.module_utils.common import validation

from ansible_collections.llmops.sglang.plugins.modules import (
    accuracy_canary,
    benchmark,
    checkpoint_info,
    cmake_cuda_plan,
    cuda_binary_info,
    cuda_toolkit_info,
    gpu_info,
    host_files,
    host_state,
    hub_download,
    kv_cache_budget,
    kv_cache_guard,
    log_audit,
    router_probe,
    router_worker,
    server_info,
    sglang_args_check,
    sglang_service_stop,
    sglang_wait_ready,
    verdict_metrics,
)


from .corpus import CONFIGS, FIXTURES, KV_LINES, LOGS, QUANT, SMI
from .harness import argument_spec, fuzz, run_main, sandbox

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODULES = {
    "accuracy_canary": accuracy_canary, "benchmark": benchmark, "checkpoint_info": checkpoint_info, "cmake_cuda_plan": cmake_cuda_plan,
    "cuda_binary_info": cuda_binary_info, "cuda_toolkit_info": cuda_toolkit_info, "gpu_info": gpu_info,
    "host_files": host_files, "host_state": host_state, "hub_download": hub_download, "kv_cache_budget": kv_cache_budget,
    "kv_cache_guard": kv_cache_guard, "log_audit": log_audit,
    "router_probe": router_probe, "router_worker": router_worker,
    "server_info": server_info, "sglang_args_check": sglang_args_check, "sglang_service_stop": sglang_service_stop,
    "sglang_wait_ready": sglang_wait_ready, "verdict_metrics": verdict_metrics,
}
# Modules of this suite's owner may be given files that never end (/dev/zero) and FIFOs: their reads are bounded.
BOUNDED_READERS = ("gpu_info", "cuda_binary_info", "cuda_toolkit_info", "cmake_cuda_plan", "host_state")
URLS = ("http://127.0.0.1:30000", "http://127.0.0.1:30000/health_generate", "https://[fd00::11]:30000", "http://[::1",
        "http://fd00::11:30000", "http://\uff03x", "127.0.0.1:30000", "http://u:p@h:1", "http://h:99999", "ftp://h", "http://a b")
UNITS = ("sglang-qwen.service", "sglang@1.service", "-x", "a b", "", "../x.service")
ARCHS = ("sm_120a", "sm_90a", "120a", "12.0a", "sm_100f", "compute_120a", "sm_999")
WORDS = ("python3", "-m", "sglang.launch_server", "--model-path", "/models/qwen", "--tp-size", "8", "--kv-cache-dtype", "fp8_e4m3",
         "bf16", "--api-key", "sk-fuzz-1", "--hf-token=hf_x", "--port", "30000")
CANARY_STATE = {"version": 1, "hash": "0" * 64, "model": "m", "answers": {"needle-4096-0.10": "K7QX-4M2D-9PLA", "coding-popcount": "7"},
                "correct": {"needle-4096-0.10": True}}


def test_every_module_is_fuzzed():
    # a module file beside an action plugin only documents it: the action runs on the controller and never runs it
    actions = {p.stem for p in (ROOT / "plugins" / "action").glob("*.py")}
    found = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if p.stem not in actions | {"__init__"})
    assert found == sorted(MODULES)


class Files(object):
    """The paths a case may name: copies of real checkpoints and logs, per-case mutated files, and odd things."""

    def __init__(self, tmp, bounded):
        self.tmp = tmp
        self.checkpoints = []
        for src in sorted((FIXTURES / "checkpoints").iterdir()):
            if src.is_dir():
                shutil.copytree(str(src), str(tmp / "ckpt" / src.name))
                self.checkpoints.append(str(tmp / "ckpt" / src.name))
        (tmp / "dir").mkdir()
        (tmp / "empty").write_bytes(b"")
        (tmp / "root" / "proc").mkdir(parents=True)
        self.odd = [str(tmp / "missing"), str(tmp / "dir"), str(tmp / "empty"), str(tmp / "root"), "/dev/null"]
        if bounded:
            os.mkfifo(str(tmp / "fifo"))
            self.odd += ["/dev/zero", str(tmp / "fifo")]
        self.n = 0

    def write(self, data, name="case"):
        self.n += 1
        path = self.tmp / ("%s-%d" % (name, self.n % 4))
        path.write_bytes(data)
        return str(path)

    def checkpoint(self, m):
        """A copy of a real checkpoint whose config.json is mutated."""
        path = self.tmp / "ckpt-case"
        if path.exists():
            shutil.rmtree(str(path))
        shutil.copytree(m.pick(self.checkpoints), str(path))
        (path / "config.json").write_text(json.dumps(m.json(CONFIGS)))
        return str(path)


def _host_entry(m, files, is_file):
    """A host_files entry whose path stays under the case's folder: that module writes, as root."""
    base = files.tmp / "hf"
    path = m.pick((str(base), str(base / "a" / "b"), str(base / m.junk().replace("/", "_").replace("\x00", "")[:40]),
                   str(files.tmp / "dir"), str(files.tmp / "empty"), str(base) + "/", "relative/x", ""))
    entry = {"path": path, "owner": m.pick(("root", "nobody", "no-such-user-llmops", m.junk(), None)),
             "group": m.pick(("root", "nogroup", m.junk(), None)), "mode": m.pick(("0644", "0600", 0o755, "999", "rw", 644, None))}
    if is_file:
        entry[m.pick(("content", "secret_content"))] = m.pick((m.junk(), m.text(LOGS, 3), "", None))
        if m.chance(3):
            entry["validate"] = m.pick(("true %s", "/bin/false %s", "no-percent", m.junk()))
    return dict((k, v) for k, v in entry.items() if v is not None)


def _verdicts():
    """Real verdicts: the H200 run's guard and canary results."""
    found = []
    for path in sorted((FIXTURES / "real-sglang").glob("*.result.json")):
        recorded = json.loads(path.read_text())
        found += [recorded[k] for k in ("canary_first", "canary_drift") if k in recorded]
        found += [recorded["clean"]["guard"]] if isinstance(recorded.get("clean"), dict) and "guard" in recorded["clean"] else []
    return found


VERDICTS = _verdicts()


def _hint(name, module_name, m, files):
    """Values worth trying for an option of this name (real samples), or None to use only its type's values."""
    if module_name == "verdict_metrics" and name == "dir":
        return m.pick((str(files.tmp / "dir"), str(files.tmp / "missing"), str(files.tmp / "empty"), "relative"))
    if module_name == "verdict_metrics" and name == "result":
        return m.pick(VERDICTS + [m.json(VERDICTS)])
    if module_name == "verdict_metrics" and name == "labels":
        return m.pick(({"unit": m.pick(UNITS)}, {m.junk(): m.junk()}, {"unit": m.value(2)}))
    if module_name == "host_state" and name == "commands":
        # only programs that change nothing: the module runs what it is given
        return [{"name": m.pick(("pip_list", "a", m.junk())), "timeout": m.pick((1, 5, None)),
                 "argv": m.pick((["/bin/echo", m.junk()], ["/bin/true"], ["/bin/false"], [str(files.tmp / "no-python"), "-m", "pip"],
                                 ["/bin/cat", "/dev/null"], []))} for _i in range(m.r.randrange(3))]
    if module_name == "hub_download" and name in ("cli", "local_dir", "stall_timeout", "sample_interval"):
        # programs that end at once: the module runs what it is given, and stops only a stalled one
        return m.pick({"cli": ("/bin/true", "/bin/false", str(files.tmp / "missing"), str(files.tmp / "dir"), "relative/hf"),
                       "local_dir": (str(files.tmp / "dl"), str(files.tmp / "empty"), str(files.tmp / "missing")),
                       "stall_timeout": (0, 1, -1), "sample_interval": (0.05, 0, -1.0)}[name])
    if module_name == "host_state" and name in ("paths", "read"):
        return [m.pick(tuple(files.odd) + (files.write(m.data(LOGS, 3)), m.junk())) for _i in range(m.r.randrange(4))]
    if module_name in ("host_files", "host_state") and name in ("directories", "files"):
        # never a generated dict or "k=v" string: its path could name anything on this machine
        return m.pick(([_host_entry(m, files, name == "files") for _i in range(m.r.randrange(4))], 7))
    if name in ("url", "worker_url", "drain_url"):
        return m.pick(URLS + (m.junk(),))
    if name == "routers":
        return [m.pick(URLS) for _i in range(m.r.randrange(3))]
    if name in ("checkpoint",) or (name == "path" and module_name == "checkpoint_info"):
        return m.pick((m.pick(files.checkpoints), files.checkpoint(m)) + tuple(files.odd))
    if name == "path" and module_name == "log_audit":
        return m.pick((files.write(m.data(LOGS, 80)),) + tuple(files.odd))
    if name == "path":
        return m.pick((files.write(m.data(SMI, 5), "lib.so"), files.write(b"PK\x03\x04" + m.data(SMI, 5), "w.whl")) + tuple(files.odd))
    if name == "driver_version_file":
        return m.pick((files.write(m.data(SMI, 10)),) + tuple(files.odd))
    if name in ("sysfs_root", "procfs_root", "cache_dir", "nvidia_smi", "lspci", "nvcc", "cuobjdump", "python", "sglang_python"):
        return m.pick(tuple(files.odd) + (str(files.tmp / m.junk().replace("/", "_").replace("\x00", "")),))
    if name == "model_config":
        return m.json(CONFIGS)
    if name == "hf_quant_config":
        return m.json(QUANT)
    if name == "observed_pool":
        return m.pick((m.text(KV_LINES, 1), {"tokens": m.number(), "k_gb": m.number()}, m.value()))
    if name == "previous":
        return m.json([CANARY_STATE])
    if name in ("argv", "args"):
        return [m.pick(WORDS + (m.junk(),)) for _i in range(m.r.randrange(12))]
    if name == "unit":
        return m.pick(UNITS + (m.junk(),))
    if name in ("archs", "require_archs"):
        return [m.pick(ARCHS + (m.junk(),)) for _i in range(m.r.randrange(4))]
    if name == "baseline":
        return dict((m.pick((str(m.r.randrange(64)), m.junk())), m.number()) for _i in range(m.r.randrange(3)))
    return None


# ansible-core's own converters raise OverflowError (a traceback before the module's code runs) for an int option
# given inf and a float option given an int beyond 1e308: not the collection's to catch, so such values are not drawn.
_CONVERTERS = {"int": validation.check_type_int, "float": validation.check_type_float}


def _convertible(kind, value):
    try:
        _CONVERTERS[kind](value)
    except (TypeError, ValueError):
        pass
    except OverflowError:
        return False
    return True


def _value(spec, m):
    """A value for an option from its type: often a good one, often not (never one that crashes ansible-core itself)."""
    value = _draw(spec, m)
    kind = spec.get("type", "str")
    if kind in _CONVERTERS and not _convertible(kind, value):
        return 0
    if kind == "list" and spec.get("elements") in _CONVERTERS:
        # a scalar is split on commas into the list by ansible-core
        items = value if isinstance(value, list) else str(value).split(",")
        if not all(_convertible(spec["elements"], v) for v in items):
            return [0]
    return value


def _draw(spec, m):
    kind = spec.get("type", "str")
    choices = list(spec.get("choices") or [])
    if choices and m.chance(2):
        picked = m.pick(choices)
        return [picked] if kind == "list" else picked
    if "default" in spec and spec["default"] is not None and m.chance(3):
        return spec["default"]
    if kind == "bool":
        return m.pick((True, False, "yes", "no", "maybe", 2, "", None))
    if kind == "int":
        return m.pick((m.r.randrange(-3, 100), m.number(), m.junk()))
    if kind == "float":
        return m.pick((m.r.uniform(0, 100), m.number(), m.junk(), "1e308", "nan", "inf"))
    if kind == "list":
        element = dict(spec, type=spec.get("elements", "str"))
        element.pop("default", None)
        return m.pick(([_value(element, m) for _i in range(m.r.randrange(4))], m.junk(), m.scalar()))
    if kind == "dict":
        if spec.get("options"):
            return dict((key, _value(sub, m)) for key, sub in spec["options"].items() if m.chance(2))
        return m.pick((m.value(3), {}, m.junk()))
    if kind == "raw":
        return m.value(3)
    return m.pick((m.junk(), m.scalar()))


def _args(m, spec, module_name, files):
    args = {}
    for name, option in sorted(spec["argument_spec"].items()):
        if option.get("required") or m.chance(2):
            hint = _hint(name, module_name, m, files) if m.r.randrange(4) else None
            value = hint if hint is not None else _value(option, m)
            if option.get("type") == "dict" and option.get("options") and isinstance(value, dict) and name == "run_eval":
                value = dict(value, python=str(files.tmp / "python3"))
            args[name] = value
    if module_name == "verdict_metrics":  # never the real textfile directory of the machine running the tests
        args["dir"] = _hint("dir", module_name, m, files)
    if m.chance(4):
        args["_ansible_check_mode"] = True
    return args


# Module -> fuzz cases. Modules whose main() is slow per case (a prompt to build, a checkpoint to copy) get fewer.
CASES = {"accuracy_canary": 400, "benchmark": 800, "checkpoint_info": 500, "cmake_cuda_plan": 400, "cuda_binary_info": 800, "cuda_toolkit_info": 800,
         "gpu_info": 800, "host_files": 800, "host_state": 400, "hub_download": 300, "kv_cache_budget": 800, "kv_cache_guard": 600, "log_audit": 600,
         "router_probe": 400, "router_worker": 800, "server_info": 800, "sglang_args_check": 800, "sglang_service_stop": 800,
         "sglang_wait_ready": 800, "verdict_metrics": 600}


def _module_target(name, request, tmp_path, monkeypatch):
    module = MODULES[name]
    spec = argument_spec(module)
    files = Files(tmp_path, name in BOUNDED_READERS)
    monkeypatch.chdir(tmp_path)  # a relative path names something under the test's folder, never the tree
    sandbox(monkeypatch)

    def build(m):
        return _args(m, spec, name, files)

    fuzz(request, build, lambda args: run_main(module, args), CASES[name])


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_arguments(name, request, tmp_path, monkeypatch):
    _module_target(name, request, tmp_path, monkeypatch)
