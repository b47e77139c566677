# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One hand-off from every role to its Python: the role's vars/main.yml lists the settings (_ROLE_setting_names) and
the results (_ROLE_result_names) it hands over, equal to the plan module's SETTINGS and RESULTS; it calls its one
filter (llmops.sglang.ROLE_plan) with its settings and a phase; that filter says it is internal to the role. The other
filters are generic and say nothing of the kind."""

import ast
import importlib
import pathlib
import re

import pytest
import yaml

from ansible_collections.llmops.sglang.plugins.plugin_utils._role_filter import registered

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLUGIN_UTILS = "ansible_collections.llmops.sglang.plugins.plugin_utils."
# Role -> the plan module behind its one filter.
ROLES = {
    "gpu_preflight": "_gpu_preflight_plan",
    "sglang_runtime": "_sglang_runtime_plan",
    "sgl_kernel": "_sgl_kernel_plan",
    "fp4_kernels": "_fp4_kernels_plan",
    "sglang_server": "_sglang_server_plan",
    "router": "_router_plan",
    "audit": "_audit_checks",
    "benchmark": "_benchmark_report",
}
# Filters for anyone: URLs, Markdown, pins, and the playbooks' report.
GENERIC = {"markdown", "local_url", "is_loopback", "worker_url", "unmet_requirements", "site_summary", "host_report"}
INTERNAL = re.compile(r"Internal to the collection's C\((\w+)\) role")


def _filters():
    """{filter name: its DOCUMENTATION} for every filter plugin."""
    out = {}
    for path in sorted((ROOT / "plugins" / "filter").glob("[!_]*.py")):
        tree = ast.parse(path.read_text())
        doc = next(node.value.value for node in tree.body if isinstance(node, ast.Assign)
                   and getattr(node.targets[0], "id", None) == "DOCUMENTATION")
        out[yaml.safe_load(doc)["name"]] = doc
    return out


def _role_yaml(role):
    return "\n".join(p.read_text() for p in sorted((ROOT / "roles" / role).glob("*/*.yml")))


def _role_vars(role):
    return yaml.safe_load((ROOT / "roles" / role / "vars" / "main.yml").read_text())


def test_every_filter_is_generic_or_internal_to_one_role_and_each_role_has_one():
    internal = {}
    for name, doc in _filters().items():
        roles = INTERNAL.findall(doc)
        if name in GENERIC:
            assert roles == [], "%s is generic: its DOCUMENTATION must not call it internal" % name
        else:
            assert roles == [name[:-len("_plan")]], "%s: neither generic nor documented as internal to its role" % name
            internal.setdefault(roles[0], []).append(name)
    assert internal == dict((role, [role + "_plan"]) for role in ROLES)


@pytest.mark.parametrize("role", sorted(ROLES))
def test_the_role_hands_over_exactly_what_its_python_reads(role):
    module = importlib.import_module(PLUGIN_UTILS + ROLES[role])
    role_vars = _role_vars(role)
    assert tuple(role_vars["_%s_setting_names" % role]) == tuple(module.SETTINGS)
    results = getattr(module, "RESULTS", ())
    names = tuple(name if isinstance(name, str) else name[1] for name in results)
    assert tuple(role_vars.get("_%s_result_names" % role, ())) == names
    # every setting is a setting of the collection's roles (or a fact one publishes, as sglang_runtime_environment),
    # every result one the role registers or sets
    defaults = {}
    for path in (ROOT / "roles").glob("*/defaults/main.yml"):
        defaults.update(yaml.safe_load(path.read_text()) or {})
    published = "\n".join(_role_yaml(path.name) for path in (ROOT / "roles").iterdir())
    assert [n for n in module.SETTINGS if n not in defaults and not re.search(r"\n\s+%s: " % n, published)] == []
    text = _role_yaml(role)
    assert [n for n in names if not re.search(r"(register: |\n\s+)%s\b" % n, text)] == []
    if names:
        # the vars lookup fails on a name not registered yet unless its default is a value (None is no default)
        assert "*_%s_result_names, default={})" % role in str(role_vars["_%s_results" % role])


def test_a_result_not_registered_yet_reads_as_none():
    assert registered({"_x_a": {}}, "_x_a") is None and registered({}, "_x_a") is None
    assert registered({"_x_a": {"skipped": True}}, "_x_a") == {"skipped": True}
    assert registered({"_x_a": False}, "_x_a") is False and registered({"_x_a": 0}, "_x_a") == 0


@pytest.mark.parametrize("role", sorted(ROLES))
def test_the_role_calls_its_one_filter_with_its_settings_and_a_phase(role):
    text = _role_yaml(role)
    module = importlib.import_module(PLUGIN_UTILS + ROLES[role])
    calls = re.findall(r"\b(\w+) \| llmops\.sglang\.%s_plan\('(\w+)'" % role, text)
    assert calls, "%s never calls llmops.sglang.%s_plan" % (role, role)
    assert {value for value, _phase in calls} == {"_%s_settings" % role}
    assert {phase for _value, phase in calls} <= set(module.PHASES)
    # no other role's filter, and no settings gathered by a pattern over variable names
    others = set(re.findall(r"\| llmops\.sglang\.(\w+_plan)\b", text)) - {role + "_plan"}
    assert others == set() and "varnames" not in text
    assert "_%s_settings:" % role in text and "*_%s_setting_names" % role in text
    filter_source = (ROOT / "plugins" / "filter" / ("%s_plan.py" % role)).read_text()
    assert "import %s\n" % ROLES[role] in filter_source
