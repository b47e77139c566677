"""The one pin rule (_pins.py) on a real `pip list --format=json`, checked against pip's own semantics."""

import json
import pathlib

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter.unmet_requirements import unmet_requirements
from ansible_collections.llmops.sglang.plugins.plugin_utils import _pins

PIP_LIST = json.loads((pathlib.Path(__file__).resolve().parents[3] / "fixtures" / "tool-outputs"
                       / "pip-list-sglang-0.5.23-cpu.json").read_text())


@pytest.mark.parametrize("requirement,met", [
    ("torch==2.13.0", True),             # a pin without a local label ignores +cpu, as pip does
    ("torch==2.13.0+cpu", True),
    ("torch==2.13.0+cu130", False),      # a local label must match exactly
    ("torch==2.13", True),               # PEP 440: 2.13 == 2.13.0
    ("torch>=2.12,<2.14", True),
    ("torch<2.13", False),
    ("pyyaml", True), ("PyYAML==6.0.4", True), ("typing-extensions==4.16.0", True), ("Typing.Extensions", True),
    ("sglang==0.5.23", True), ("sglang==0.5.22", False),
    ("not-installed", False), ("not-installed==1.0", False),
    ({"name": "torch", "version": "2.13.0"}, True), ({"name": "Torch", "version": "2.13.0+cu130"}, False),
    ({"name": "sglang", "version": None}, True), ({"name": "sglang", "version": 0.5}, False),
])
def test_a_requirement_is_met_as_pip_decides(requirement, met):
    assert (_pins.unmet([requirement], PIP_LIST) == []) is met


def test_unmet_keeps_order_and_form_and_reads_a_name_version_mapping():
    wanted = ["cmake>=3.31", "torch==2.13.0", {"name": "ninja", "version": "1.13.0"}, "wheel"]
    assert _pins.unmet(wanted, {"torch": "2.13.0+cu130", "cmake": "3.30.9", "ninja": None, "Wheel": "0.45.1"}) == [
        "cmake>=3.31", {"name": "ninja", "version": "1.13.0"}]
    assert _pins.unmet(wanted, {}) == wanted


def test_an_invalid_installed_version_is_unmet_not_a_traceback():
    assert _pins.unmet(["torch==2.13.0"], [{"name": "torch", "version": "not a version"}]) == ["torch==2.13.0"]


@pytest.mark.parametrize("bad", ["torch===", "==2.0", {"version": "1"}, "torch 2.0"])
def test_a_bad_requirement_names_the_form_to_write(bad):
    with pytest.raises(AnsibleFilterError) as err:
        unmet_requirements([bad], PIP_LIST)
    assert "NAME==VERSION" in str(err.value) or "{name:" in str(err.value)


@pytest.mark.parametrize("wheelhouse,index,extra,expected", [
    ("/srv/wheelhouse", "https://pypi.lan/simple", ["https://x/simple"], ["--no-index", "--find-links=/srv/wheelhouse"]),
    (None, "https://pypi.lan/simple", [], ["--index-url=https://pypi.lan/simple"]),
    (None, None, ["https://x/simple"], ["--extra-index-url=https://x/simple"]),
    (None, None, None, []), ("", "", [], []),
])
def test_a_wheelhouse_means_no_index_at_all(wheelhouse, index, extra, expected):
    assert _pins.index_options(wheelhouse, index, extra) == expected
