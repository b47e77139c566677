"""How the test code is wired: helpers import the normal way, and comments name files that are in the tree.

pytest.ini puts the collection and the shared helpers (tests/unit, tests/lab) on the import path and the fixtures the
unit tests share live in tests/unit/conftest.py, so no file that pytest imports changes sys.path itself. A comment or
docstring that names one of the project's Python files (a path under one of its top folders, or a private module's
file name, with its leading underscore) names one that exists when the test runs.
"""

import ast
import io
import pathlib
import re
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Programs that run on their own, never imported by pytest: setting their import path is part of their job.
PROGRAMS = {
    "tests/bench": "benchmarks run as programs; some import an older tree named on their command line",
    "tests/bin/get_pip_stand_in.py": "ansible-test runs it as get-pip.py; it installs pip from the wheel beside it",
    "tests/real_gpu/sglang/units.py": "the systemctl/journalctl stand-in on the GPU machine, run as a program",
    "tests/unit/sglang_emulated_gpu.py": "runs in SGLang's interpreter, whose torchvision without compiled ops goes first",
}
TOP = ("plugins", "roles", "playbooks", "tests", "extensions", "awx", "docs", "meta")
SKIPPED = {"__pycache__", ".pytest_cache", ".hypothesis"}
TEXT_SUFFIXES = {".py", ".yml", ".yaml", ".j2", ".sh", ".cfg", ".ini", ""}
PY_NAME = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.py)\b")


def _tree():
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and not SKIPPED & set(path.parts):
                yield path


def changes_import_path(source):
    """Lines of source that change sys.path (insert, append, extend, assignment) or add a site directory."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if node.func.attr == "addsitedir" or (node.func.attr in ("insert", "append", "extend") and _is_sys_path(owner)):
                lines.append(node.lineno)
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_is_sys_path(t.value if isinstance(t, ast.Subscript) else t) for t in targets):
                lines.append(node.lineno)
    return lines


def _is_sys_path(node):
    return isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) and node.value.id == "sys"


def comments(path, text):
    """(line, text) of every comment, and of every docstring of a Python file."""
    if path.suffix != ".py":
        return [(n, line[line.index("#"):]) for n, line in enumerate(text.splitlines(), 1) if "#" in line]
    found = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(text).readline) if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and ast.get_docstring(node):
            found.append((node.body[0].lineno, ast.get_docstring(node)))
    return found


def missing_files(text, tree_names):
    """Project Python files text names that are not in the tree: paths under a top folder of the project must exist as
    written; a bare private module's file name must be the name of some file. Other names are SGLang's or Python's."""
    missing = []
    for name in PY_NAME.findall(text):
        if name.split("/")[0] in TOP:
            if not (ROOT / name).is_file():
                missing.append(name)
        elif "/" not in name and re.match(r"_[a-z]", name) and name not in tree_names:
            missing.append(name)
    return missing


def test_no_test_file_changes_the_import_path():
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if SKIPPED & set(path.parts) or any(relative == p or relative.startswith(p + "/") for p in PROGRAMS):
            continue
        source = path.read_text(encoding="utf-8")
        if "sys.path" in source or "addsitedir" in source:
            offenders += ["%s:%d" % (relative, n) for n in changes_import_path(source)]
    assert not offenders, "import helpers the normal way (pytest.ini pythonpath, tests/unit/conftest.py): " + ", ".join(offenders)


def test_the_programs_allowed_to_set_their_import_path_exist():
    for relative in PROGRAMS:
        assert (ROOT / relative).exists(), "%s is gone: drop it from PROGRAMS" % relative


def test_the_import_path_check_sees_every_form():
    for source in ("import sys\nsys.path.insert(0, 'x')\n", "sys.path.append(d)\n", "sys.path[:0] = [d]\n",
                   "sys.path += [d]\n", "import site\nsite.addsitedir(d)\n", "sys.path.extend([d])\n"):
        assert changes_import_path(source), source
    assert changes_import_path("print(sys.path)\nx = 'sys.path.insert(0, d)'\nsys.argv.append(1)\n") == []


def test_comments_name_only_files_that_are_here():
    tree_names = {p.name for p in _tree()}
    offenders = []
    for path in _tree():
        relative = path.relative_to(ROOT).as_posix()
        if path.suffix not in TEXT_SUFFIXES or (relative.startswith("tests/fixtures/") and path.suffix != ".py"):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if not missing_files(text, tree_names):
            continue  # names nothing missing anywhere: no need to find its comments
        for line, comment in comments(path, text):
            offenders += ["%s:%d names %s" % (relative, line, name) for name in missing_files(comment, tree_names)]
    assert not offenders, "comments name files that do not exist:\n" + "\n".join(offenders)


def test_the_comment_check_tells_the_project_s_files_from_sglang_s():
    names = {"_sglang_server.py", "conftest.py"}
    assert missing_files("the plan (plugins/module_utils/_sglang_server_plan.py)", names) == ["plugins/module_utils/_sglang_server_plan.py"]
    assert missing_files("see _sglang_server_plan.py and _sglang_server.py", names) == ["_sglang_server_plan.py"]
    assert missing_files("tests/unit/conftest.py; SGLang's entrypoints/engine.py and engine.py; site.py", names) == []
    assert comments(pathlib.Path("x.py"), '"""Doc _a.py."""\nx = "_b.py"  # _c.py\n') == [(2, "# _c.py"), (1, "Doc _a.py.")]
