# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fp4_kernels role's plan (_fp4_kernels_plan.py, filter llmops.sglang.fp4_kernels_plan).

Where the role puts a prebuilt module is read back from the pinned flashinfer-python wheels' own jit/env.py and
jit/core.py (tests/fixtures/flashinfer/) with ``ast``: the path FlashInfer loads a module from without any build step
must be the plan's ``aot_path``, and a module in the JIT cache must be reachable only through ninja, so a release that
moves either fails here. The generators the role calls are FlashInfer's own, at the lines the FP4 table names. The
probes and the build driver run for real (on stand-in packages: no FlashInfer or nvcc here), and the packing is
byte-for-byte repeatable."""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import os
import pathlib
import posixpath
import subprocess
import sys
import types

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter.fp4_kernels_plan import fp4_kernels_plan
from ansible_collections.llmops.sglang.plugins.module_utils import _fp4_kernels as fk
from ansible_collections.llmops.sglang.plugins.plugin_utils import _fp4_kernels_plan as fp

import role_plan  # tests/unit/role_plan.py
from module_utils import fp4_derive  # tests/unit/plugins/module_utils/fp4_derive.py (pytest puts tests/unit/plugins on sys.path)

ROOT = pathlib.Path(__file__).resolve().parents[4]
ROLE = ROOT / "roles" / "fp4_kernels"
DRIVER = ROLE / "files" / "flashinfer_build.py"
SITE = "/opt/sglang/venv/lib/python3.11/site-packages"
TOOLKIT = {"installed": True, "release": "13.0", "version": "13.0.88"}
PROBE = {"flashinfer-python": "0.7.2", "apache-tvm-ffi": "0.1.15.post2", "torch": "2.14.1", "ninja": "1.13.2", "cores": 16}


def settings(**over):
    values = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    values.update(fp4_kernels_build_host="build1", fp4_kernels_controller_dir="/root/.cache/llmops-sglang/fp4-kernels")
    values.update(("fp4_kernels_" + k, v) for k, v in over.items())
    return values


def stdout(data):
    return {"rc": 0, "stdout": json.dumps(data), "stderr": "", "changed": False}


def plan(values=None, host="build1", check_mode=False, **results):
    full = dict((name, {}) for name in fp.RESULTS)
    full.update(results)
    return fp4_kernels_plan(values or settings(), "plan", full, {"host": host, "play_hosts": ["build1", "gpu2"], "check_mode": check_mode})


def built(names, error=None):
    if error:
        return stdout({"error": error})
    return stdout({"flashinfer": "0.7.2", "arch_list": "12.0a 12.0f", "modules": [
        {"name": n, "sha256": hashlib.sha256(n.encode()).hexdigest(), "bytes": 1000, "seconds": 60.0, "path": "/x/%s.so" % n} for n in names]})


def verify(names, failed=()):
    return {"results": [dict({"item": n, "changed": False, "kernel_matches": [{"pattern": "fp4|e2m1", "arch": "sm_120a", "count": 3}]},
                             **({"failed": True, "msg": "no kernel matching 'fp4|e2m1' has a cubin for sm_120a"} if n in failed else {}))
                        for n in names]}


def stat(sha):
    return {"changed": False, "stat": {"exists": sha is not None, "checksum": sha}}


# ----------------------------------------------------------------------------------------------
# Where FlashInfer loads a prebuilt module from: read from its own source


def _eval(node, names):
    return eval(compile(ast.Expression(node), "<flashinfer>", "eval"), dict(names))


def _function_returns(fn):
    return [n.value for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]


def _calls(fn):
    return {ast.unparse(c.func) for c in ast.walk(fn) if isinstance(c, ast.Call)}


@pytest.mark.parametrize("version", sorted(fk.FLASHINFER))
def test_aot_path_is_where_flashinfer_loads_a_module_without_building(version):
    env = fp4_derive.flashinfer_tree(version, "flashinfer/jit/env.py")
    core = fp4_derive.flashinfer_tree(version, "flashinfer/jit/core.py")
    package = SITE + "/flashinfer"
    names = {"pathlib": pathlib, "__file__": package + "/jit/env.py"}
    names["_package_root"] = _eval(fp4_derive.module_assign(env, "_package_root").value, names)
    assert str(names["_package_root"]) == package
    aot_dir = fp4_derive.module_assign(env, "FLASHINFER_AOT_DIR").value
    if isinstance(aot_dir, ast.Call):  # 0.6.14: _get_aot_dir(), the package's data/aot unless flashinfer-jit-cache is installed
        getter = fp4_derive.find_def(env, aot_dir.func.id, ast.FunctionDef)
        assert ast.unparse(getter.body[1].test) == "has_flashinfer_jit_cache()" and version in fp.JIT_CACHE_HIDES_AOT
        aot_dir = getter.body[-1].value
    else:
        assert version not in fp.JIT_CACHE_HIDES_AOT
    names["FLASHINFER_AOT_DIR"] = _eval(aot_dir, names)
    names["jit_env"] = types.SimpleNamespace(FLASHINFER_AOT_DIR=names["FLASHINFER_AOT_DIR"])
    spec = fp4_derive.find_def(core, "JitSpecNvcc" if version != "0.6.14" else "JitSpec", ast.ClassDef)
    methods = dict((n.name, n) for n in spec.body if isinstance(n, ast.FunctionDef))
    if "try_load" in methods:  # 0.7.2: get_aot_artifacts' first statement returns data/aot's file, for every GPU
        lookup = fp4_derive.find_def(env, "get_aot_artifacts", ast.FunctionDef)
        first, check = lookup.body[1], lookup.body[2]
        assert isinstance(check, ast.If) and ast.unparse(check.test) == "%s.exists()" % first.targets[0].id
        assert ast.unparse(check.body[0].value) == "(AOTArtifact('flashinfer-python', fallback_path, None),)"
        path = _eval(first.value, dict(names, module_name="fused_moe_120"))
        # try_load loads that artifact and returns it (no architectures: no fallback), with no build step
        loader = methods["try_load"]
        assert "self.load" in _calls(loader) and not {"self.build", "run_ninja", "self._build_and_load_jit_fallback"} & _calls(loader)
        assert "artifact.cuda_architectures is None" in ast.unparse(loader) and "jit_library_path" not in ast.unparse(loader)
        # build_and_load asks try_load before anything else
        top = fp4_derive.find_def(core, "JitSpec", ast.ClassDef)
        bal = next(n for n in top.body if isinstance(n, ast.FunctionDef) and n.name == "build_and_load")
        assert ast.unparse(bal.body[0]) == "cached = self.try_load()" and ast.unparse(bal.body[1].test) == "cached is not None"
    else:  # 0.6.14: build_and_load loads aot_path when it exists, before any build
        aot = next(n for n in ast.walk(core) if isinstance(n, ast.FunctionDef) and n.name == "aot_path")
        path = _eval(aot.body[-1].value, dict(names, self=types.SimpleNamespace(name="fused_moe_120")))
        bal = methods["build_and_load"]
        assert ast.unparse(bal.body[0].test) == "self.is_aot" and ast.unparse(bal.body[0].body[0]) == "return self.load(self.aot_path)"
    assert str(path) == fp.aot_path(package, "fused_moe_120")


@pytest.mark.parametrize("version", sorted(fk.FLASHINFER))
def test_a_module_in_the_jit_cache_is_loaded_only_after_ninja(version):
    """Why not ship into ~/.cache/flashinfer/.../cached_ops: FlashInfer runs build() (ninja, nvcc) before it loads from there."""
    core = fp4_derive.flashinfer_tree(version, "flashinfer/jit/core.py")
    build = next(n for n in ast.walk(core) if isinstance(n, ast.FunctionDef) and n.name == "build"
                 and "run_ninja" in _calls(n))
    assert "self.write_ninja" in _calls(build)
    top = fp4_derive.find_def(core, "JitSpec", ast.ClassDef)
    bal = next(n for n in ast.walk(top) if isinstance(n, ast.FunctionDef) and n.name == "build_and_load")
    text = ast.unparse(bal)
    assert text.index("self.build(") < text.rindex("self.load(") and "jit_library_path" not in ast.unparse(bal.body[0])


@pytest.mark.parametrize("version", sorted(fk.FLASHINFER))
def test_generators_are_flashinfers_own(version):
    for module, generator in fk.GENERATORS.items():
        dotted, function = generator.split(":")
        rel, line = fk.FLASHINFER[version]["modules"][module]["generator"].split(":")
        assert rel == dotted.replace(".", "/") + ".py"
        fn = fp4_derive.find_def(fp4_derive.flashinfer_tree(version, rel), function, ast.FunctionDef)
        assert fn.lineno == int(line), "%s is at %s:%d, the table says %s" % (function, rel, fn.lineno, line)
        assert fp4_derive.jit_module(version, rel, function)["name"] == module


# ----------------------------------------------------------------------------------------------
# Which modules, which archs, which toolkit


def words(quant="modelopt_fp4", gemm="flashinfer_cudnn", moe="flashinfer_cutlass", extra=()):
    """The launch words as server_wiring.yml builds them from the server's settings (a null setting stays a null)."""
    return ["--quantization", quant, "--fp4-gemm-backend", gemm, "--moe-runner-backend", moe] + list(extra)


@pytest.mark.parametrize("over, expected", [
    ({}, ["fp4_quantization_120f", "fused_moe_120"]),
    ({"launch_args": words(gemm="flashinfer_cutlass")}, ["fp4_quantization_120f", "fp4_gemm_cutlass_sm120", "fused_moe_120"]),
    ({"launch_args": words(gemm=None, moe=None)}, ["fp4_quantization_120f", "fp4_gemm_cutlass_sm120", "fused_moe_120"]),
    ({"launch_args": words(extra=["--fp4-gemm-backend=marlin", "--moe-runner-backend", "marlin"])}, []),
    ({"launch_args": words(quant=None)}, []),
    ({"modules": ["fp4_gemm_cutlass_sm120"]}, ["fp4_gemm_cutlass_sm120"]),
    ({"sglang_release": "0.5.16", "launch_args": words(gemm="flashinfer_cutlass")},
     ["fp4_quantization_120f", "fp4_gemm_cutlass_sm120", "fused_moe_120"]),
])
def test_modules_come_from_the_units_backends(over, expected):
    p = plan(settings(**over))
    assert p["input_error"] is None and p["modules"] == expected
    assert p["requirements"][0] == "flashinfer-python==%s" % fk.RELEASES[settings(**over)["fp4_kernels_sglang_release"]]["flashinfer-python"]


@pytest.mark.parametrize("over, words", [
    ({"modules": ["fp4_gemm_cutlass_sm100"]}, ["fp4_gemm_cutlass_sm100", "not a FlashInfer 0.7.2 SM 12.0 FP4 module"]),
    ({"launch_args": words(moe="flashinfer_trtllm")}, ["no SM 12.0 kernels", "fix: use --moe-runner-backend flashinfer_cutlass"]),
    ({"sglang_release": "0.5.30"}, ["0.5.30 is not in the FP4 kernel table", "0.5.16, 0.5.23"]),
    ({"build_host": "elsewhere"}, ["the build host (elsewhere) must be one of the play's hosts (build1, gpu2)"]),
    ({"build_jobs": 0}, ["fp4_kernels_build_jobs must be null or an integer >= 1"]),
    ({"require_kernels": []}, ["fp4_kernels_require_kernels is empty"]),
])
def test_bad_inputs_are_named_with_the_fix(over, words):
    error = plan(settings(**over))["input_error"]
    for word in words:
        assert word in error


@pytest.mark.parametrize("release, family, expected", [
    ("12.8", True, "12.0a"), ("12.9", True, "12.0a 12.0f"), ("13.0", True, "12.0a 12.0f"), ("13.0", False, "12.0a"), (None, True, "12.0a"),
])
def test_arch_list(release, family, expected):
    assert fp.arch_list(release, family) == expected


def test_each_module_is_checked_for_its_own_archs():
    p = plan(settings(launch_args=words(gemm="flashinfer_cutlass")), _fp4_kernels_toolkit=TOOLKIT)
    assert p["arch_list"] == "12.0a 12.0f"
    # fp4_quantization_120f is compiled for sm_120f whatever the list says; the others follow the list
    assert p["required_archs"] == {"fp4_quantization_120f": ["sm_120f"], "fp4_gemm_cutlass_sm120": ["sm_120a", "sm_120f"],
                                   "fused_moe_120": ["sm_120a", "sm_120f"]}


@pytest.mark.parametrize("toolkit, modules, needs", [
    ({"installed": True, "release": "12.8"}, None, "12.9"),
    ({"installed": True, "release": "12.8"}, ["fp4_gemm_cutlass_sm120"], None),
    ({"installed": False}, ["fp4_gemm_cutlass_sm120"], "12.8"),
    ({"installed": True, "release": "13.0"}, None, None),
])
def test_toolkit_verdict(toolkit, modules, needs):
    error = plan(settings(modules=modules), _fp4_kernels_toolkit=toolkit)["toolkit_error"]
    assert (error is None) is (needs is None)
    if needs:
        assert "need nvcc %s or newer" % needs in error and "fp4_kernels_cuda_home" in error


# ----------------------------------------------------------------------------------------------
# Cache key, build decision, verification, stamp


def test_the_key_follows_every_input():
    base = fp.key_inputs("0.7.2", TOOLKIT, PROBE, "12.0a 12.0f", ["fused_moe_120"])
    key = fp.cache_key(base)
    assert fp.cache_key(fp.key_inputs("0.7.2", dict(TOOLKIT), dict(PROBE), "12.0a 12.0f", ["fused_moe_120"])) == key
    changed = [
        fp.key_inputs("0.6.14", TOOLKIT, PROBE, "12.0a 12.0f", ["fused_moe_120"]),
        fp.key_inputs("0.7.2", dict(TOOLKIT, release="12.9"), PROBE, "12.0a 12.0f", ["fused_moe_120"]),
        fp.key_inputs("0.7.2", dict(TOOLKIT, version="13.0.48"), PROBE, "12.0a 12.0f", ["fused_moe_120"]),
        fp.key_inputs("0.7.2", TOOLKIT, dict(PROBE, **{"apache-tvm-ffi": "0.1.16"}), "12.0a 12.0f", ["fused_moe_120"]),
        fp.key_inputs("0.7.2", TOOLKIT, PROBE, "12.0a", ["fused_moe_120"]),
        fp.key_inputs("0.7.2", TOOLKIT, PROBE, "12.0a 12.0f", ["fused_moe_120", "fp4_quantization_120f"]),
    ]
    assert len({fp.cache_key(c) for c in changed} | {key}) == len(changed) + 1


def _slurp(stamp):
    return {"changed": False, "content": base64.b64encode(json.dumps(stamp).encode()).decode(), "encoding": "base64"}


def _decided(**results):
    return plan(**dict({"_fp4_kernels_toolkit": TOOLKIT, "_fp4_kernels_venv_probe": stdout(PROBE)}, **results))


def test_build_decision_follows_the_stamp():
    first = _decided(_fp4_kernels_stamp={"failed": True, "msg": "file not found"})
    assert first["build"] and "no stamp yet: build" in first["cache_message"]
    assert first["env"]["FLASHINFER_CUDA_ARCH_LIST"] == "12.0a 12.0f" and first["env"]["MAX_JOBS"] == "16"
    assert first["env"]["FLASHINFER_WORKSPACE_BASE"] == "/var/cache/llmops-sglang/fp4-kernels/workspace"
    assert json.loads(first["request"])["modules"] == [{"name": m, "generator": fk.GENERATORS[m]} for m in first["modules"]]
    same = _decided(_fp4_kernels_stamp=_slurp({"key": first["key"], "sha256": "a" * 64}))
    assert not same["build"] and "the stamp matches: no build" in same["cache_message"]
    changed = _decided(_fp4_kernels_stamp=_slurp({"key": "0" * 64}))
    assert changed["build"] and "the key changed" in changed["cache_message"]
    forced = plan(settings(force_rebuild=True, build_jobs=3), _fp4_kernels_toolkit=TOOLKIT, _fp4_kernels_venv_probe=stdout(PROBE),
                  _fp4_kernels_stamp=_slurp({"key": first["key"]}))
    assert forced["build"] and forced["env"]["MAX_JOBS"] == "3"
    checked = plan(check_mode=True, _fp4_kernels_toolkit=TOOLKIT, _fp4_kernels_venv_probe=stdout(PROBE), _fp4_kernels_stamp={})
    assert checked["build_needed"] and not checked["build"]


def test_a_build_venv_with_another_flashinfer_is_refused():
    with pytest.raises(AnsibleFilterError, match="has flashinfer-python 0.6.14, not 0.7.2"):
        _decided(_fp4_kernels_venv_probe=stdout(dict(PROBE, **{"flashinfer-python": "0.6.14"})))
    with pytest.raises(AnsibleFilterError, match="the build venv probe printed no JSON"):
        _decided(_fp4_kernels_venv_probe={"rc": 1, "stdout": "", "stderr": "No such file"})


def test_a_failed_build_names_flashinfers_error():
    with pytest.raises(AnsibleFilterError, match="FlashInfer's build failed on build1: RuntimeError: Ninja build failed"):
        _decided(_fp4_kernels_built=built([], error="RuntimeError: Ninja build failed"))


def test_verification_stamp_and_record():
    names = ["fp4_quantization_120f", "fused_moe_120"]
    bad = _decided(_fp4_kernels_built=built(names), _fp4_kernels_verify=verify(names, failed=["fused_moe_120"]))
    assert bad["verify_errors"] == ["fused_moe_120: no kernel matching 'fp4|e2m1' has a cubin for sm_120a"]
    skipped = _decided(_fp4_kernels_built=built(names), _fp4_kernels_verify={"results": [{"item": "fused_moe_120", "skipped": True}]})
    assert skipped["verify_errors"] == ["fp4_quantization_120f was not checked", "fused_moe_120 was not checked"]
    good = _decided(_fp4_kernels_built=built(names), _fp4_kernels_verify=verify(names), _fp4_kernels_archive=stat("b" * 64))
    assert good["verify_errors"] == [] and good["archive_error"] is None
    stamp = json.loads(good["stamp_json"])
    assert stamp["key"] == good["key"] and stamp["sha256"] == "b" * 64 and sorted(stamp["modules"]) == names
    assert stamp["kernels"]["fused_moe_120"] == {"fp4|e2m1@sm_120a": 3}
    record = good["record"]
    assert record["sha256"] == "b" * 64 and record["modules"] == names and record["arch_list"] == "12.0a 12.0f"
    assert record["controller_path"] == "/root/.cache/llmops-sglang/fp4-kernels/%s/fp4-kernels-%s.tar" % (good["key"][:16], good["key"][:16])
    # no build: the archive must be the one the stamp names
    kept = _decided(_fp4_kernels_stamp=_slurp({"key": good["key"], "sha256": "b" * 64}), _fp4_kernels_archive=stat("c" * 64))
    assert "the stamp says " + "b" * 64 in kept["archive_error"] and fp.STAMP_NAME in kept["archive_error"]
    assert _decided(_fp4_kernels_stamp=_slurp({"key": good["key"], "sha256": "b" * 64}), _fp4_kernels_archive=stat("b" * 64))["archive_error"] is None


def test_the_controller_copy_and_the_build_result_are_checked():
    record = {"sha256": "b" * 64, "controller_path": "/c/x.tar", "archive": "/d/x.tar", "modules": ["fused_moe_120"],
              "flashinfer": "0.7.2", "key": "k" * 64, "arch_list": "12.0a"}
    assert plan(fp4_kernels_build=record, _fp4_kernels_controller=stat("b" * 64))["controller_error"] is None
    assert "the build host verified " + "b" * 64 in plan(fp4_kernels_build=record, _fp4_kernels_controller=stat("e" * 64))["controller_error"]
    assert plan(host="gpu2", fp4_kernels_build=record)["build_result_error"] is None
    assert "the build host build1 has no verified build" in plan(host="gpu2", fp4_kernels_build=False)["build_result_error"]


# ----------------------------------------------------------------------------------------------
# On each server

RECORD = {"sha256": "b" * 64, "controller_path": "/c/fp4-kernels-k.tar", "archive": "/d/fp4-kernels-k.tar",
          "modules": ["fp4_quantization_120f", "fused_moe_120"], "flashinfer": "0.7.2", "key": "k" * 64, "arch_list": "12.0a 12.0f"}
TARGET = {"flashinfer_dir": SITE + "/flashinfer", "version": "0.7.2", "jit_cache_package": False, "stamp": None, "present": []}


def _server(target, record=None, local=None):
    return plan(host="gpu2", fp4_kernels_build=record or RECORD, _fp4_kernels_target=stdout(target), **({"_fp4_kernels_local": local} if local else {}))


def test_a_server_gets_the_modules_into_its_flashinfers_data_aot():
    p = _server(TARGET)
    assert p["install"] and p["install_error"] is None and p["aot_dir"] == SITE + "/flashinfer/data/aot"
    assert p["local_archive"] == "/var/cache/llmops-sglang/fp4-kernels-archives/fp4-kernels-k.tar"
    assert json.loads(p["installed_stamp_json"])["sha256"] == "b" * 64
    done = dict(TARGET, stamp={"sha256": "b" * 64}, present=["fp4_quantization_120f", "fused_moe_120"])
    assert not _server(done)["install"]
    assert _server(dict(done, present=["fused_moe_120"]))["install"]  # a module removed by hand comes back
    assert _server(dict(done, stamp={"sha256": "0" * 64}))["install"]
    assert "the build host verified " + "b" * 64 in _server(TARGET, local=stat("e" * 64))["install_error"]
    assert _server(TARGET, local=stat("b" * 64))["install_error"] is None


@pytest.mark.parametrize("target, record, words", [
    (dict(TARGET, version="0.7.3"), None, ["flashinfer-python 0.7.3, the modules were built from 0.7.2"]),
    ({"flashinfer_dir": None, "error": "ModuleNotFoundError"}, None, ["has no flashinfer package", "sglang_runtime"]),
    (dict(TARGET, version="0.6.14", jit_cache_package=True), dict(RECORD, flashinfer="0.6.14"), ["flashinfer-jit-cache", "_get_aot_dir"]),
])
def test_a_server_that_cannot_load_the_modules_is_refused(target, record, words):
    p = _server(target, record)
    assert p["install"] is False
    for word in words:
        assert word in p["install_error"]


def test_a_jit_cache_package_does_not_hide_data_aot_from_0_7():
    assert _server(dict(TARGET, jit_cache_package=True))["install_error"] is None


# ----------------------------------------------------------------------------------------------
# What runs on the hosts, run here


def _fake_flashinfer(tmp_path, version="0.7.2"):
    site = tmp_path / "site"
    pkg = site / "flashinfer"
    (pkg / "jit").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('imported: the probe must only find the package')\n")
    dist = site / ("flashinfer_python-%s.dist-info" % version)
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: flashinfer-python\nVersion: %s\n" % version)
    return site, pkg


def _run_probe(argv, site):
    env = dict(os.environ, PYTHONPATH=str(site))
    proc = subprocess.run([sys.executable] + argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          env=env, check=True, timeout=60)
    return json.loads(proc.stdout)


def test_the_server_probe_finds_flashinfer_without_importing_it(tmp_path):
    site, pkg = _fake_flashinfer(tmp_path)
    argv = fp.target_probe_argv({"venv": "/unused"})
    assert argv[0] == "/unused/bin/python"
    first = _run_probe(argv, site)
    assert first == {"flashinfer_dir": str(pkg), "version": "0.7.2", "jit_cache_package": False, "stamp": None, "present": []}
    so = pathlib.Path(fp.aot_path(str(pkg), "fused_moe_120"))
    so.parent.mkdir(parents=True)
    so.write_bytes(b"\x7fELF")
    (pkg / "data" / "aot" / "empty").mkdir()
    (pkg / "data" / "aot" / fp.INSTALLED_STAMP_NAME).write_text(json.dumps({"sha256": "b" * 64}))
    second = _run_probe(argv, site)
    assert second["present"] == ["fused_moe_120"] and second["stamp"] == {"sha256": "b" * 64}


def test_the_build_venv_probe_reads_versions_and_cores():
    answer = json.loads(subprocess.run([sys.executable] + fp.venv_probe_argv({"build_venv": "/unused"})[1:], stdout=subprocess.PIPE,
                                       universal_newlines=True, check=True, timeout=60).stdout)
    assert answer["cores"] == len(os.sched_getaffinity(0)) and set(answer) == {"flashinfer-python", "apache-tvm-ffi", "torch", "ninja", "cores"}
    import importlib.metadata
    assert answer["ninja"] == (importlib.metadata.version("ninja") if answer["ninja"] else None)


GENERATOR_STANDIN = '''
import os, pathlib
class Spec:
    def __init__(self, name):
        self.name, self.sources, self.extra_cuda_cflags = name, ["a.cu", "b.cu"], ["-O3", "-gencode=arch=compute_120a,code=sm_120a"]
        self.jit_library_path = pathlib.Path(os.environ["FLASHINFER_WORKSPACE_BASE"]) / name / (name + ".so")
    def build(self, verbose=False):
        self.jit_library_path.parent.mkdir(parents=True, exist_ok=True)
        self.jit_library_path.write_bytes(b"built " + self.name.encode() + os.environ["FLASHINFER_CUDA_ARCH_LIST"].encode())
def gen_good():
    return Spec("fused_moe_120")
def gen_misnamed():
    return Spec("something_else")
'''


@pytest.mark.parametrize("generator, error", [("gen_good", None), ("gen_misnamed", "made a spec named something_else, not fused_moe_120")])
def test_the_build_driver_builds_with_the_generator_and_copies_into_the_aot_layout(tmp_path, generator, error):
    site, pkg = _fake_flashinfer(tmp_path)
    (pkg / "__init__.py").write_text("")
    (pkg / "version.py").write_text("__version__ = '0.7.2'\n")
    (pkg / "jit" / "__init__.py").write_text("")
    (pkg / "jit" / "standin.py").write_text(GENERATOR_STANDIN)
    out = tmp_path / "staging"
    request = {"out": str(out), "modules": [{"name": "fused_moe_120", "generator": "flashinfer.jit.standin:" + generator}]}
    env = dict(os.environ, PYTHONPATH=str(site), FLASHINFER_WORKSPACE_BASE=str(tmp_path / "ws"), FLASHINFER_CUDA_ARCH_LIST="12.0a")
    proc = subprocess.run([sys.executable, "-c", DRIVER.read_text(), json.dumps(request)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=env, timeout=60, check=False)
    answer = json.loads(proc.stdout)
    if error:
        assert proc.returncode == 1 and error in answer["error"]
        return
    assert proc.returncode == 0, proc.stderr
    so = out / "fused_moe_120" / "fused_moe_120.so"
    assert so.read_bytes() == b"built fused_moe_12012.0a"
    module = answer["modules"][0]
    assert answer["flashinfer"] == "0.7.2" and answer["arch_list"] == "12.0a"
    assert module["path"] == str(so) and module["sha256"] == hashlib.sha256(so.read_bytes()).hexdigest() and module["sources"] == 2
    assert module["nvcc_flags"] == ["-gencode=arch=compute_120a,code=sm_120a"]
    # the layout the role ships is the one aot_path names, relative to data/aot
    assert posixpath.relpath(fp.aot_path("/p", "fused_moe_120"), "/p/data/aot") == str(so.relative_to(out))


def test_packing_is_repeatable(tmp_path):
    p = _decided()
    names = p["modules"]
    staging = tmp_path / "staging"
    for name in names:
        (staging / name).mkdir(parents=True)
        (staging / name / (name + ".so")).write_bytes(name.encode() * 100)
    digests = []
    for attempt in range(2):
        archive = tmp_path / ("a%d.tar" % attempt)
        argv = [str(staging) if a == p["staging"] else str(archive) if a == p["archive"] else a for a in p["pack_argv"]]
        subprocess.run(argv, check=True, timeout=60)
        os.utime(staging / names[0] / (names[0] + ".so"), (1, 1))  # another mtime must not change the bytes
        digests.append(hashlib.sha256(archive.read_bytes()).hexdigest())
    assert digests[0] == digests[1]
    listing = subprocess.run(["tar", "-tf", str(archive)], stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.split()
    assert [n for n in listing if n.endswith(".so")] == ["%s/%s.so" % (n, n) for n in sorted(names)]


def test_the_plan_is_a_fact_worked_out_again_after_each_result_it_follows():
    """tasks/plan.yml keeps the plan as the fact _fp4_kernels (nothing templates it at each use), the first task reads
    it, and no task reads it between a result the plan follows and the next plan.yml."""
    assert "_fp4_kernels" not in yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    [refresh] = yaml.safe_load((ROLE / "tasks" / "plan.yml").read_text())
    assert refresh["ansible.builtin.set_fact"]["_fp4_kernels"] == "{{ _fp4_kernels_new }}"
    assert next(role_plan.tasks(ROLE / "tasks" / "main.yml")).get("ansible.builtin.import_tasks") == "plan.yml"
    assert role_plan.stale_reads(ROLE, "_fp4_kernels", fp.RESULTS, "fp4_kernels_build") == []
