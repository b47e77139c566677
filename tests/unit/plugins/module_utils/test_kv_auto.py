# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""``--kv-cache-dtype auto``: the collection's rules (_kv_auto) against SGLang 0.5.23's own code.

The differential test runs every checkpoint shape in tests/fixtures/checkpoint-shapes through the REAL
SGLang (ModelConfig, get_quant_config, configure_kv_cache_dtype; plugins/module_utils/_kv_auto_probe.py)
in .cache/sglang-venv (tests/lab/bin/make-sglang-venv, run by `make setup`; $LLMOPS_SGLANG_PYTHON
overrides), one subprocess for all shapes, and requires the pure model's answer to equal SGLang's.
Without the venv it skips locally and fails in CI (env CI set).
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _kv_auto as ka

import sglang_source  # tests/unit/sglang_source.py, on sys.path through tests/unit/conftest.py

ROOT = pathlib.Path(__file__).resolve().parents[4]
SHAPES = ROOT / "tests" / "fixtures" / "checkpoint-shapes"
SHAPE_DIRS = sorted(p for p in SHAPES.iterdir() if p.is_dir())


def _load(path):
    with open(path) as fh:
        return json.load(fh)


def model_answer(directory):
    hf = directory / "hf_quant_config.json"
    return ka.resolve(_load(directory / "config.json"), _load(hf) if hf.exists() else None)


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
    result = ka.run_probe(sglang_python, [str(p) for p in SHAPE_DIRS + odd_dirs], timeout=600,
                          env=sglang_source.python_env(sglang_python))
    assert result["sglang_version"] == ka.SGLANG_VERSION
    return dict((os.path.basename(a["path"]), a) for a in result["answers"])


@pytest.fixture(scope="module")
def sglang_answers(probe_answers):
    return dict((p.name, probe_answers[p.name]) for p in SHAPE_DIRS)


def test_enough_shapes():
    assert len(SHAPE_DIRS) >= 25
    assert sum(1 for p in SHAPE_DIRS if p.name.startswith("r")) >= 10


@pytest.mark.parametrize("shape", SHAPE_DIRS, ids=lambda p: p.name)
def test_model_equals_sglang(shape, sglang_answers):
    sglang = sglang_answers[shape.name]
    model = model_answer(shape)
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
