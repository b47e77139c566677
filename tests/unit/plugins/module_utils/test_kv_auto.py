# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""``--kv-cache-dtype auto``: the collection's rules (_kv_auto) against SGLang 0.5.23's own code.

Two differential tests run every checkpoint shape in tests/fixtures/checkpoint-shapes through the REAL SGLang in
.cache/sglang-venv (tests/lab/bin/make-sglang-venv, run by `make setup`; $LLMOPS_SGLANG_PYTHON overrides):

- SGLang's start-up path on emulated GPUs of capability 9.0, 10.0 and 12.0 (tests/unit/sglang_emulated_gpu.py: the
  server args with their architecture and GPU overrides, ModelConfig, the loader's quantization config with its
  capability check, configure_kv_cache_dtype), one subprocess per GPU, against the model for that GPU;
- the probe the modules send (plugins/module_utils/_kv_auto_probe.py) on this CPU-only machine, against the model
  for any GPU.

Every row of _kv_auto.RULES is read back from SGLang's source with ast.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _kv_auto as ka

import sglang_source  # tests/unit/sglang_source.py, on sys.path through tests/unit/conftest.py

ROOT = pathlib.Path(__file__).resolve().parents[4]
SHAPES = ROOT / "tests" / "fixtures" / "checkpoint-shapes"
SHAPE_DIRS = sorted(p for p in SHAPES.iterdir() if p.is_dir())


def _load(path):
    with open(path) as fh:
        return json.load(fh)


def model_answer(directory, gpu=None):
    hf = directory / "hf_quant_config.json"
    return ka.resolve(_load(directory / "config.json"), _load(hf) if hf.exists() else None, gpu=gpu)


GPUS = ("9.0", "10.0", "12.0")
# The one difference allowed besides both refusing: shapes SGLang refuses to start for a reason outside the KV-dtype
# rules the model follows (it answers what auto would become), named here with the text of SGLang's refusal.
SGLANG_REFUSES_ONLY = {
    # transformers 5.19's DeepseekV4Config (SGLang 0.5.23's pin) rejects the null kv_lora_rank the real config carries
    "r23-mc13-deepseek-v4-unquantized": "Field 'kv_lora_rank' expected int, got NoneType",
}
EMULATOR = ROOT / "tests" / "unit" / "sglang_emulated_gpu.py"


@pytest.fixture(scope="module")
def emulated(sglang_python):
    """SGLang's start-up answers per emulated GPU: {capability: {shape: answer}}."""
    answers = {}
    for capability in GPUS:
        request = json.dumps({"capability": capability, "paths": [str(p) for p in SHAPE_DIRS]})
        done = subprocess.run([sglang_python, "-B", str(EMULATOR)], input=request, capture_output=True, text=True,
                              timeout=600, env=dict(os.environ, HF_HUB_OFFLINE="1"), check=False)
        lines = [line for line in done.stdout.splitlines() if line.startswith("EMULATED_GPU_RESULT=")]
        assert lines, "the emulated start-up gave no answer (exit %s): %s" % (done.returncode, done.stderr[-3000:])
        result = json.loads(lines[-1].split("=", 1)[1])
        assert result["sglang_version"] == ka.SGLANG_VERSION and result["capability"] == capability
        answers[capability] = dict((os.path.basename(a["path"]), a) for a in result["answers"])
    return answers


@pytest.mark.parametrize("capability", GPUS)
@pytest.mark.parametrize("shape", SHAPE_DIRS, ids=lambda p: p.name)
def test_model_equals_sglang_start_up_on_gpu(shape, capability, emulated):
    sglang = emulated[capability][shape.name]
    model = model_answer(shape, capability)
    assert model["decided_for"] == "capability " + capability
    if shape.name in SGLANG_REFUSES_ONLY:
        assert SGLANG_REFUSES_ONLY[shape.name] in sglang["error"] and not model["refused"]
        return
    if sglang["error"]:
        # the one difference allowed: SGLang refusing to start, and then the model refuses too
        assert model["refused"], "SGLang refuses at %s (%s) but the model says %s" % (sglang["stage"], sglang["error"], model)
        assert model["kv_cache_dtype_auto"] is None
        return
    assert not model["refused"], "the model refuses (%s) but SGLang runs %s" % (model["refused"], sglang)
    assert (model["quantization"], model["config_class"], model["model_dtype"], model["kv_cache_dtype_auto"]) == (
        sglang["quantization"], sglang["config_class"], sglang["model_dtype"], sglang["kv_cache_dtype_auto"])
    assert model["kv_cache_quant_algo"] == sglang["kv_cache_quant_algo"]


def test_emulated_gpus_tell_apart_what_the_gpu_decides(emulated):
    """The GPU changes SGLang's answer on some shapes (else the emulation proves nothing about GPU rules)."""
    differs = [name for name in emulated["9.0"] if len(set(json.dumps(emulated[c][name], sort_keys=True) for c in GPUS)) > 1]
    assert "s40-deepseek-v32-dsa-fp8-kv-by-gpu" in differs and "s31-flat-mxfp8-scheme-fp8" in differs
    assert emulated["9.0"]["s40-deepseek-v32-dsa-fp8-kv-by-gpu"]["kv_cache_dtype_auto"] == "bfloat16"
    assert emulated["10.0"]["s40-deepseek-v32-dsa-fp8-kv-by-gpu"]["kv_cache_dtype_auto"] == "fp8_e4m3"
    assert "Minimum capability: 100" in emulated["9.0"]["s31-flat-mxfp8-scheme-fp8"]["error"]
    # the same rule on a real DeepSeek-V3.2-Exp config (Quark FP8): the GPU, not the checkpoint, decides its KV dtype
    real_dsa = "r36-mc17-deepseek-v32-exp-quark-ptpc-fp8"
    assert [emulated[c][real_dsa]["kv_cache_dtype_auto"] for c in GPUS] == ["bfloat16", "fp8_e4m3", "fp8_e4m3"]
    assert emulated["9.0"][real_dsa]["config_class"] == "QuarkConfig"
    # NVIDIA's NVFP4 DeepSeek-V3.2 asks for FP8 KV in hf_quant_config.json: an H200 still gets bf16
    nvfp4_dsa = emulated["9.0"]["r37-mc18-deepseek-v32-nvfp4-kv-fp8-by-gpu"]
    assert (nvfp4_dsa["kv_cache_quant_algo"], nvfp4_dsa["kv_cache_dtype_auto"]) == ("FP8", "bfloat16")


# A checkpoint file that is a FIFO, socket or device: SGLang would block opening it, so the probe refuses by name.
ODD = (("config.json", "fifo"), ("hf_quant_config.json", "socket"), ("model.safetensors.index.json", "dev_zero"))


@pytest.fixture(scope="module")
def odd_dirs(tmp_path_factory):
    import shutil

    from odd_files import make_odd  # tests/unit/odd_files.py

    dirs = []
    for name, kind in ODD:
        copy = tmp_path_factory.mktemp("odd") / ("odd-%s-%s" % (name, kind))
        shutil.copytree(SHAPES / "r04-lab-nvfp4", copy)
        make_odd(copy / name, kind)
        dirs.append(copy)
    return dirs


@pytest.fixture(scope="module")
def probe_answers(sglang_python, odd_dirs):
    """SGLang's answers for the shapes and the odd directories, from one probe run."""
    # as the modules run it: the venv's interpreter alone, no PYTHONPATH (the probe finds its torchvision itself)
    result = ka.run_probe(sglang_python, [str(p) for p in SHAPE_DIRS + odd_dirs], timeout=600)
    assert result["sglang_version"] == ka.SGLANG_VERSION and result["cuda"] is False
    return dict((os.path.basename(a["path"]), a) for a in result["answers"])


@pytest.fixture(scope="module")
def sglang_answers(probe_answers):
    return dict((p.name, probe_answers[p.name]) for p in SHAPE_DIRS)


def test_enough_shapes():
    assert len(SHAPE_DIRS) >= 60
    assert sum(1 for p in SHAPE_DIRS if p.name.startswith("r")) >= 10


@pytest.mark.parametrize("shape", SHAPE_DIRS, ids=lambda p: p.name)
def test_model_equals_sglang(shape, sglang_answers):
    """The probe on this CPU-only machine: equal, or it names the CUDA-only paths it could not run and the model stands."""
    sglang = sglang_answers[shape.name]
    model = model_answer(shape)
    assert sglang["not_run_paths"] == ["server_args", "loader", "cuda"], "this machine has no CUDA: the probe must say so"
    side = ka.compare(model, sglang)
    if shape.name in SGLANG_REFUSES_ONLY:
        assert SGLANG_REFUSES_ONLY[shape.name] in sglang["error"] and not model["refused"]
        return
    if side["agree"] is None:
        assert model["cuda_paths"] and side["used"] == "model"
        assert not sglang["error"] or model["refused"], "the probe refuses a checkpoint SGLang serves: %s" % sglang
        return
    if sglang["error"]:
        assert model["refused"], "SGLang refuses (%s) but the model says %s" % (sglang["error"], model)
        assert model["kv_cache_dtype_auto"] is None
        return
    assert not model["refused"], "the model refuses (%s) but SGLang runs %s" % (model["refused"], sglang)
    assert (model["quantization"], model["config_class"], model["kv_cache_dtype_auto"]) == (
        sglang["quantization"], sglang["config_class"], sglang["kv_cache_dtype_auto"])
    assert model["model_dtype"] == sglang["model_dtype"]
    assert model["kv_cache_quant_algo"] == sglang["kv_cache_quant_algo"]


@pytest.mark.parametrize("name,kind", ODD)
def test_the_probe_never_lets_sglang_open_a_checkpoint_file_that_is_not_regular(probe_answers, name, kind):
    answer = probe_answers["odd-%s-%s" % (name, kind)]
    assert answer["stage"] == "files" and answer["kv_cache_dtype_auto"] is None
    assert answer["error"].startswith("%s in %s is not a regular file" % (name, answer["path"]))


def test_probe_never_refuses_what_sglang_serves_on_a_gpu(sglang_answers, emulated):
    """Every shape SGLang starts on some emulated GPU gets no refusal from the probe on this CPU-only machine."""
    served = [name for name in emulated["12.0"] if any(not emulated[c][name]["error"] for c in GPUS)]
    assert len(served) >= 60
    refused = [(name, sglang_answers[name]["error"]) for name in served if sglang_answers[name]["error"]]
    assert refused == []


def test_probe_names_cuda_only_paths_instead_of_refusing(sglang_answers):
    """mxfp4 is not registered and gptq not converted without CUDA: the probe says so and does not refuse."""
    for name in ("s38-gpt-oss-mxfp4-no-dtype-bf16-forced", "s43-gptq-int4-marlin"):
        answer = sglang_answers[name]
        assert answer["error"] is None and answer["kv_cache_dtype_auto"] is None
        assert any("only on CUDA" in text for text in answer["not_run"]), answer
        model = model_answer(SHAPES / name)
        assert ka.compare(model, answer)["agree"] is None and model["kv_cache_dtype_auto"] in ("bfloat16", "float16")


def test_shapes_cover_both_answers_and_refusals(sglang_answers):
    answers = [a["kv_cache_dtype_auto"] for a in sglang_answers.values()]
    assert answers.count("fp8_e4m3") >= 10 and answers.count("bfloat16") >= 10
    assert sum(1 for a in sglang_answers.values() if a["error"]) >= 3
    classes = set(a["config_class"] for a in sglang_answers.values())
    assert {"ModelOptFp8Config", "ModelOptFp4Config", "ModelOptMixedPrecisionConfig", "CompressedTensorsConfig",
            "Fp8Config", None} <= classes


# --- the rules one by one (the same shapes, without SGLang) --------------------------------------


@pytest.mark.parametrize("shape,expected,decided_by", [
    ("r07-lab-nvfp4-flat-nokv", "bfloat16", "config.json:quantization_config"),
    ("s07-config-nokv-hf-fp8-ignored", "bfloat16", "config.json:quantization_config"),
    ("r04-lab-nvfp4", "fp8_e4m3", "hf_quant_config.json"),
    ("s02-flat-fp8-scheme-int8-wins-over-algo", "bfloat16", "config.json:quantization_config"),
    ("s03-flat-nvfp4-string-scheme-fp8", "fp8_e4m3", "config.json:quantization_config"),
    ("s05-flat-fp8-string-scheme-ignored", "bfloat16", "config.json:quantization_config"),
    ("s10-mixed-flat-nokv-falls-back-to-hf", "fp8_e4m3", "hf_quant_config.json"),
    ("s12-ct-static-tensor-fp8", "fp8_e4m3", "config.json:quantization_config"),
    ("r34-mc15-laguna-xs2-ct-fp8-block-kv-fp8", "fp8_e4m3", "config.json:quantization_config"),
    ("s13-ct-dynamic", "bfloat16", "config.json:quantization_config"),
    ("s23-hf-kv-padded", "bfloat16", "hf_quant_config.json"),
    ("s26-config-nested-kv-inside-ignored", "bfloat16", "config.json:quantization_config"),
])
def test_rule(shape, expected, decided_by):
    answer = model_answer(SHAPES / shape)
    assert (answer["kv_cache_dtype_auto"], answer["decided_by"]) == (expected, decided_by)
    assert answer["sglang_version"] == "0.5.23"


@pytest.mark.parametrize("shape,field,shown", [
    ("s19-hf-kv-int", "quantization.kv_cache_quant_algo", "is 8 (a int, not a string)"),
    ("s20-hf-kv-list", "quantization.kv_cache_quant_algo", 'is ["FP8"] (a list, not a string)'),
    ("s21-hf-kv-dict", "quantization.kv_cache_quant_algo", 'is {"algo": "FP8"}'),
    ("s25-hf-fp8-kv-int", "quantization.kv_cache_quant_algo", "is 8 (a int, not a string)"),
    ("s34-ct-string-scheme-ignored", "kv_cache_scheme", 'is "FP8"'),
    ("s06-flat-nvfp4-string-scheme-nvfp4", "kv_cache_scheme", 'is "NVFP4"'),
])
def test_wrong_typed_or_unknown_kv_field_warns_by_name(shape, field, shown):
    answer = model_answer(SHAPES / shape)
    assert answer["kv_cache_dtype_auto"] == "bfloat16"
    assert len(answer["warnings"]) == 1
    assert (" %s %s" % (field, shown)) in answer["warnings"][0]
    assert "--kv-cache-dtype" in answer["warnings"][0]


def test_fp8_answer_has_no_warning():
    assert model_answer(SHAPES / "r01-qc01-llama-3.3-70b-fp4")["warnings"] == []


def test_refusals_name_the_reason():
    assert "Cannot find the config file for modelopt_mixed" in model_answer(
        SHAPES / "s11-mixed-flat-nokv-no-hf-refused")["refused"]
    assert "Unknown quantization method" in model_answer(SHAPES / "s33-unknown-method-refused")["refused"]


def test_multiple_hf_quant_files_refused():
    answer = ka.resolve(_load(SHAPES / "s24-hf-fp8-kv-fp8" / "config.json"),
                        _load(SHAPES / "s24-hf-fp8-kv-fp8" / "hf_quant_config.json"),
                        ["hf_quant_config.json", "old.hf_quant_config.json"])
    assert "multiple config files" in answer["refused"]


# --- the probe's error paths ----------------------------------------------------------------------


def test_probe_missing_interpreter(tmp_path):
    with pytest.raises(ka.ProbeError, match="does not exist: set sglang_python"):
        ka.run_probe(str(tmp_path / "nope" / "python"), [])


def test_probe_without_sglang(tmp_path):
    import sys
    # this interpreter has no sglang: a clear error, not a traceback
    with pytest.raises(ka.ProbeError, match="SGLang is not importable by"):
        ka.run_probe(sys.executable, [str(SHAPE_DIRS[0])], timeout=120)


def test_probe_not_python(tmp_path):
    script = tmp_path / "fake-python"
    script.write_text("#!/bin/sh\necho hello\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(ka.ProbeError, match="gave no answer \\(exit code 3\\)"):
        ka.run_probe(str(script), [])


def test_compare_trusts_sglang():
    model = ka.resolve(_load(SHAPES / "r07-lab-nvfp4-flat-nokv" / "config.json"))
    sglang = {"quantization": "modelopt_fp4", "config_class": "ModelOptFp4Config", "kv_cache_dtype_auto": "fp8_e4m3",
              "error": None}
    side = ka.compare(model, sglang)
    assert side["agree"] is False
    assert side["sglang"]["kv_cache_dtype_auto"] == "fp8_e4m3" and side["model"]["kv_cache_dtype_auto"] == "bfloat16"
    assert side["used"] == "sglang"


def test_compare_keeps_the_model_where_the_probe_skipped_the_rule():
    """On a GPU host the probe runs no server-args override: DeepSeek DSA's bf16 on an H200 is the model's to say."""
    model = model_answer(SHAPES / "s40-deepseek-v32-dsa-fp8-kv-by-gpu", "9.0")
    sglang = {"quantization": "fp8", "config_class": "Fp8Config", "kv_cache_dtype_auto": "fp8_e4m3", "error": None,
              "not_run_paths": ["server_args", "loader"], "not_run": ["the server arguments' overrides", "the loader's checks"]}
    side = ka.compare(model, sglang)
    assert (side["agree"], side["used"], side["model"]["kv_cache_dtype_auto"]) == (None, "model", "bfloat16")
    # nor does it run the loader's capability check: MXFP8 on an H200 is refused whatever the probe answered
    mxfp8 = model_answer(SHAPES / "s31-flat-mxfp8-scheme-fp8", "9.0")
    assert ka.compare(mxfp8, dict(sglang, quantization="mxfp8"))["used"] == "model" and mxfp8["refused"]
    # the same probe answer for a checkpoint no such rule touches is compared as before
    plain = model_answer(SHAPES / "s17-fp8-block-kv-fp8", "9.0")
    assert ka.compare(plain, sglang)["agree"] is True


def test_probe_builds_the_model_config_as_the_server_does():
    """The server builds ModelConfig with its --trust-remote-code (False by default); ModelConfig's own default is True,
    under which a checkpoint's auto_map would import its configuration_*.py (Laguna: r34, r35) in the probe."""
    fields = _class(_tree("arg_groups/fields/model.py"), "Model")   # the server args' model group
    default = [n for n in fields.body if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "trust_remote_code"]
    assert ast.literal_eval(default[0].value) is False
    assert _line("configs/model_config.py", 957).strip() == "trust_remote_code=cfg.trust_remote_code,"
    probe = ast.parse((ROOT / "plugins" / "module_utils" / "_kv_auto_probe.py").read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(probe) if isinstance(n, ast.Call) and ast.unparse(n.func) == "api['ModelConfig']"]
    assert [ast.unparse(k) for c in calls for k in c.keywords if k.arg == "trust_remote_code"] == ["trust_remote_code=False"]


# --- the rules table against SGLang's source (ast) ------------------------------------------------


def _tree(relative):
    return sglang_source.parse(str(sglang_source.srt_dir() / relative))


def _line(relative, line):
    return (sglang_source.srt_dir() / relative).read_text(encoding="utf-8").splitlines()[line - 1]


def _class(tree, name):
    found = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name]
    assert found, "no class %s" % name
    return found[0]


def _method(cls, name):
    found = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name]
    assert found, "%s has no %s" % (cls.name, name)
    return found[0]


def _enclosing_function(tree, line):
    funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.lineno <= line <= n.end_lineno]
    assert funcs, "line %d is in no function" % line
    return max(funcs, key=lambda n: n.lineno)


def _min_capability(tree, class_name):
    """get_min_capability's value for a class: (line, plain value, value as MXFP8) from its last return."""
    returns = [n for n in ast.walk(_method(_class(tree, class_name), "get_min_capability")) if isinstance(n, ast.Return)]
    ret = max(returns, key=lambda n: n.lineno)
    value = ret.value
    if isinstance(value, ast.Constant):
        return ret.lineno, value.value, None
    if isinstance(value, ast.IfExp):   # `100 if self.use_mxfp8 else 80`
        assert "use_mxfp8" in ast.unparse(value.test)
        return ret.lineno, value.orelse.value, value.body.value
    if isinstance(value, ast.Call):    # delegates to another class's
        other = value.func.value.id
        return ret.lineno, _min_capability(tree, other)[1], None
    raise AssertionError("unexpected get_min_capability in %s: %s" % (class_name, ast.unparse(value)))


@pytest.mark.parametrize("rule", [r for r in ka.RULES if r["kind"] == "min_capability"], ids=lambda r: r["id"])
def test_min_capability_rows_are_sglangs_own(rule):
    relative, line = rule["at"]
    assert _min_capability(_tree(relative), rule["config_class"]) == (line, rule["value"], rule.get("mxfp8"))


def test_every_config_class_the_model_builds_has_its_capability_row():
    classes = set(ka.CONFIG_CLASSES.values())
    rows = set(r["config_class"] for r in ka.RULES if r["kind"] == "min_capability")
    assert classes <= rows


def test_loader_checks_capability_and_act_dtype_where_the_table_says():
    assert "capability < quant_config.get_min_capability()" in _line(*ka.LOADER_CAPABILITY_CHECK)
    assert "model_config.dtype not in supported_dtypes" in _line(*ka.LOADER_ACT_DTYPE_CHECK)
    rule = [r for r in ka.RULES if r["kind"] == "act_dtype"][0]
    method = _method(_class(_tree(rule["at"][0]), rule["config_class"]), "get_supported_act_dtypes")
    assert method.body[0].lineno == rule["at"][1]
    # `[torch.float16] if not _is_npu else [...]`: on CUDA the first list
    assert [ast.unparse(e) for e in method.body[0].value.body.elts] == ["torch.%s" % d for d in rule["value"]]


@pytest.mark.parametrize("rule", [r for r in ka.RULES if r["kind"] == "convert"], ids=lambda r: r["id"])
def test_convert_rows_are_sglangs_own(rule):
    relative, line = rule["at"]
    tree = _tree(relative)
    func = _enclosing_function(tree, line)
    assert func.name == "override_quantization_method" and _line(relative, line).strip() == "return cls.get_name()"
    owner = [c for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and func in c.body][0]
    name = [n for n in ast.walk(_method(owner, "get_name")) if isinstance(n, ast.Return)][0].value.value
    assert name == rule["value"]
    source = ast.unparse(tree)
    assert "quant_method != %r" % rule["method"] in source
    # marlin's group sizes and the capability below which it runs nothing
    marlin = _tree("layers/quantization/marlin_utils.py")
    sizes = [n for n in marlin.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "MARLIN_SUPPORTED_GROUP_SIZES"]
    assert tuple(ast.literal_eval(sizes[0].value)) == ka.MARLIN_GROUP_SIZES
    assert "if device_capability < %d:" % rule["min_capability"] in ast.unparse(marlin)


def test_gptq_is_not_registered_on_cuda():
    """gptq reaches SGLang's registry only on NPU, CPU and XPU: on CUDA it is served as gptq_marlin or refused."""
    tree = _tree("layers/quantization/__init__.py")
    base = [n for n in tree.body if isinstance(n, ast.AnnAssign) and n.target.id == "BASE_QUANTIZATION_METHODS"][0]
    names = set(ast.literal_eval(k) for k in base.value.keys)
    assert "gptq" not in names and "gptq_marlin" in names
    assert names - {"gptq_marlin", "awq_marlin", "awq"} <= ka.SUPPORTED_METHODS | {"mxfp_w4a8"}
    for node in tree.body:
        if isinstance(node, ast.If) and "gptq" in ast.unparse(node.body[0]):
            assert "is_cuda" not in ast.unparse(node.test)


@pytest.mark.parametrize("rule", [r for r in ka.RULES if r["kind"] in ("dtype", "kv")], ids=lambda r: r["id"])
def test_architecture_rows_are_sglangs_own(rule):
    relative, line = rule["at"]
    text = _line(relative, line)
    assert '"%s"' % rule["value"] in text, "%s:%d is %r" % (relative, line, text)
    tree = _tree(relative)
    if rule["kind"] == "dtype" and "MODEL_OVERRIDES" in ast.unparse(tree) and rule.get("quant_method") is None:
        table = [n for n in tree.body if isinstance(n, ast.AnnAssign) and n.target.id == "MODEL_OVERRIDES"][0]
        forced = [ast.literal_eval(k) for k, v in zip(table.value.keys, table.value.values)
                  if ast.literal_eval(v) == {"dtype": rule["value"]}]
        assert tuple(forced) == rule["architectures"] and table.value.keys[0].lineno == line
        return
    func = ast.unparse(_enclosing_function(tree, line))
    decorated = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.lineno <= line <= n.end_lineno]
    decorators = " ".join(ast.unparse(d) for n in decorated for d in n.decorator_list)
    if rule["id"] == "deepseek-dsa-kv":
        family = [n for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "_DEEPSEEK_FAMILY_ARCHS"][0]
        dsa = _enclosing_function(_tree("configs/model_config.py"), 195)
        assert dsa.name == "is_deepseek_dsa" and '"%s") is not None' % rule["needs"] in ast.unparse(dsa).replace("'", '"')
        dsa_names = set(ast.literal_eval(dsa.body[0].value.values[0].comparators[0]))
        assert set(rule["architectures"]) == set(ast.literal_eval(family.value.args[0])) & dsa_names
        assert "major >= %d" % (rule["min_capability"] // 10) in text and rule["unless"] in func
        assert '"%s"' % rule["below"] in text
        return
    for name in rule["architectures"]:
        assert name in func or name in decorators, "%s names no %s" % (relative, name)
    if rule.get("quant_method"):
        assert "quant_method') == %r" % rule["quant_method"] in func


@pytest.mark.parametrize("rule", [r for r in ka.RULES if r["kind"] == "kv"], ids=lambda r: r["id"])
def test_a_conditional_kv_row_says_its_condition(rule):
    """kv_cache_guard takes its FP8 architecture rules from these rows, and treats a row without ``when`` as one that
    decides on auto alone: a row with a GPU or config condition, or one not modelled, must say it in words."""
    conditional = rule.get("min_capability") is not None or rule.get("needs") or rule.get("modelled") is False
    assert bool(rule.get("when")) == bool(conditional)


# --- the GPU option ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value,expected", [
    ("12.0", "12.0"), (12.0, "12.0"), (120, "12.0"), ("9.0", "9.0"), (90, "9.0"),
    ({"compute_capability": "10.0", "count": 8}, "10.0"),
    ({"gpus": [{"compute_capability": "12.0"}, {"compute_capability": "9.0"}], "gpu_count": 2}, "9.0"),
])
def test_gpu_forms(value, expected):
    assert ka.normalize_gpu(value)["compute_capability"] == expected


@pytest.mark.parametrize("value", ["twelve", "12.0.1", -1, 0, True, {"count": 2}, {"compute_capability": "9.0", "count": -1}])
def test_bad_gpu_names_the_form(value):
    with pytest.raises(ValueError, match="compute capability must look like|has no compute_capability|count must be"):
        ka.normalize_gpu(value)


@pytest.mark.parametrize("value", [None, {"gpu_count": 0, "gpus": []}, {"gpu_count": 1, "gpus": [{"compute_capability": None}]}])
def test_gpu_info_without_a_capability_is_any_gpu(value):
    assert ka.normalize_gpu(value) is None


def test_any_gpu_answer_names_the_rules_that_could_change_it():
    answer = model_answer(SHAPES / "s40-deepseek-v32-dsa-fp8-kv-by-gpu")
    assert answer["decided_for"] == "any GPU" and answer["gpu"] is None
    # fp8_e4m3 from capability 10.0, bf16 below: no answer holds for every GPU
    assert answer["kv_cache_dtype_auto"] is None and not answer["refused"]
    assert any("depends on the GPU" in w for w in answer["warnings"])
    assert any("sglang/srt/arg_groups/overrides.py:534" in text and "capability 10.0 or newer" in text
               for text in answer["could_change"])
    on_h200 = model_answer(SHAPES / "s40-deepseek-v32-dsa-fp8-kv-by-gpu", {"compute_capability": "9.0", "count": 8})
    assert on_h200["kv_cache_dtype_auto"] == "bfloat16" and on_h200["could_change"] == []
    assert on_h200["decided_by_rule"] == "deepseek-dsa-kv sglang/srt/arg_groups/overrides.py:534"
    assert on_h200["gpu"] == {"compute_capability": "9.0", "count": 8}


def test_capability_refusal_names_sglangs_lines():
    answer = model_answer(SHAPES / "s31-flat-mxfp8-scheme-fp8", "9.0")
    assert "Minimum capability: 100. Current capability: 90." in answer["refused"]
    assert "sglang/srt/layers/quantization/fp8.py:339" in answer["refused"]
    assert model_answer(SHAPES / "s31-flat-mxfp8-scheme-fp8", "10.0")["kv_cache_dtype_auto"] == "fp8_e4m3"


@pytest.mark.parametrize("shape,method,kv", [
    ("s43-gptq-int4-marlin", "gptq_marlin", "float16"),
    ("s44-gptq-int4-desc-act", "gptq_marlin", "float16"),
    ("s49-awq-int4-float16", "awq_marlin", "float16"),
    ("s51-awq-int4-no-zero-point-float16", "awq", "float16"),
])
def test_gptq_and_awq_are_served_with_the_model_dtype_kv(shape, method, kv):
    answer = model_answer(SHAPES / shape, "12.0")
    assert (answer["quantization"], answer["kv_cache_dtype_auto"], answer["refused"]) == (method, kv, None)


def test_reference_deployment_is_unchanged_and_says_its_gpu():
    """Qwen3.5-397B-A17B-NVFP4 on the RTX PRO 6000 (capability 12.0): the same answer, now decided for 12.0."""
    ckpt = ROOT / "tests" / "fixtures" / "checkpoints" / "qwen3.5-397b-a17b-nvfp4"
    config, hf = _load(ckpt / "config.json"), _load(ckpt / "hf_quant_config.json")
    before, on_gpu = ka.resolve(config, hf), ka.resolve(config, hf, gpu="12.0")
    keys = ("quantization", "config_class", "kv_cache_quant_algo", "model_dtype", "kv_cache_dtype_auto", "decided_by")
    assert [before[k] for k in keys] == [on_gpu[k] for k in keys]
    assert on_gpu["kv_cache_dtype_auto"] == "fp8_e4m3" and on_gpu["decided_for"] == "capability 12.0"
    assert [r["rule"] for r in on_gpu["rules"]] == ["min-capability-ModelOptFp4Config"]
