"""Where code runs decides where it lives: ``plugins/module_utils`` holds what modules import (and so what travels to
the hosts); ``plugins/plugin_utils`` holds what only the controller runs (filters, lookups, the action plugin), each
file marked private. Read from the import statements with ``ast``, so a move or a new import that breaks the rule fails
here, naming the file and the fix."""

import ast
import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "plugins"
PACKAGE = "ansible_collections.llmops.sglang.plugins."
HOST_ENTRY = ("modules",)
CONTROLLER_ENTRY = ("filter", "lookup", "action", "callback", "inventory", "test")
PRIVATE = "# Private to this collection's roles and plugins: runs on the controller only"


def _name(path):
    return ".".join(path.relative_to(PLUGINS).with_suffix("").parts)


def _imports(path):
    """The collection's plugin files path imports, as dotted names relative to plugins/."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
            base = node.module[len(PACKAGE):]
            found.add(base)
            found.update(base + "." + alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name[len(PACKAGE):] for a in node.names if a.name.startswith(PACKAGE))
    return found


@pytest.fixture(scope="module")
def graph():
    files = {_name(p): p for p in PLUGINS.rglob("*.py") if p.name != "__init__.py"}
    return {name: _imports(path) & set(files) for name, path in files.items()}


def _reached(graph, entry_folders, entries=()):
    todo = [name for name in graph if name.split(".")[0] in entry_folders] + list(entries)
    seen = set()
    while todo:
        for dep in graph[todo.pop()]:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_every_module_util_is_imported_by_a_module(graph):
    host = _reached(graph, HOST_ENTRY)
    controller_only = sorted(n for n in graph if n.startswith("module_utils.") and n not in host)
    assert controller_only == [], "only the controller imports %s: move them to plugins/plugin_utils/" % controller_only


def test_no_module_reaches_a_plugin_util(graph):
    host = _reached(graph, HOST_ENTRY)
    shipped = sorted(n for n in host if n.startswith("plugin_utils."))
    assert shipped == [], "modules import %s (directly or through module_utils): controller code would travel to hosts" % shipped


def test_every_plugin_util_is_used_and_marked_private(graph):
    used = _reached(graph, CONTROLLER_ENTRY)
    for name in (n for n in graph if n.startswith("plugin_utils.")):
        assert name in used, "%s is imported by no controller plugin: delete it or wire it" % name
        assert PRIVATE in (PLUGINS / (name.replace(".", "/") + ".py")).read_text(encoding="utf-8"), \
            "%s lacks the private header (%r...)" % (name, PRIVATE)


def test_the_rule_sees_a_misplaced_import(graph):
    """The check itself: a module that imported a plugin_util, or a module_util no module needs, is caught."""
    plugin_util = next(n for n in graph if n.startswith("plugin_utils."))
    broken = dict(graph, **{"modules.log_audit": graph["modules.log_audit"] | {plugin_util}})
    assert plugin_util in _reached(broken, HOST_ENTRY)
    orphan = dict(graph, **{"module_utils._orphan": set()})
    assert "module_utils._orphan" not in _reached(orphan, HOST_ENTRY)


def test_the_action_group_is_every_module_that_talks_to_a_server():
    """meta/runtime.yml's action group `sglang` (module_defaults for a server's URL, key and timeouts) lists exactly the
    modules that send requests: those whose arguments include the HTTP client's TLS options (_http.TLS_ARGUMENT_SPEC,
    which every module that sends a request takes). A module that only borrows one of _http's constants is not one."""
    talks = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if "**TLS_ARGUMENT_SPEC" in p.read_text(encoding="utf-8"))
    listed = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text(encoding="utf-8"))["action_groups"]["sglang"]
    assert talks and sorted(listed) == talks, "action_groups.sglang lists %s; the modules that send requests: %s" % (listed, talks)
