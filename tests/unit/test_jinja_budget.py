"""Roles and playbooks gather, call and format; Python decides. This keeps the Jinja small enough to read:
no expression longer than MAX_EXPRESSION characters, and at most MAX_TOTAL characters of expressions in all
task, vars and handler files of roles/ and playbooks/ together. Templates of files written to disk
(roles/*/templates) are not counted. `python tests/unit/test_jinja_budget.py` prints the measure."""

import collections
import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAX_EXPRESSION = 150
MAX_TOTAL = 31050
PATTERNS = ("roles/*/tasks/*.yml", "roles/*/vars/*.yml", "roles/*/handlers/*.yml", "playbooks/**/*.yml")
# Keys whose value Ansible evaluates as a bare Jinja expression.
CONDITIONALS = {"when", "that", "until", "changed_when", "failed_when"}
EXPRESSION = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!unsafe", lambda loader, node: "")   # never templated
_Loader.add_constructor("!vault", lambda loader, node: "")


def _expressions(node, key=None, seen=None):
    """Every expression once: a YAML alias (*name) is the anchored node again, read once by a reader."""
    seen = set() if seen is None else seen
    if isinstance(node, (dict, list)):
        if id(node) in seen:
            return
        seen.add(id(node))
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _expressions(v, k, seen)
    elif isinstance(node, list):
        for v in node:
            yield from _expressions(v, key, seen)
    elif isinstance(node, str):
        found = EXPRESSION.findall(node)
        if found:
            yield from found
        elif key in CONDITIONALS:
            yield node


def measure(root=ROOT):
    """{relative path: [expression, ...]} for every counted file."""
    files = sorted({p for pattern in PATTERNS for p in root.glob(pattern)})
    return {str(p.relative_to(root)): list(_expressions(yaml.load(p.read_text(), Loader=_Loader))) for p in files}


def test_the_measure_counts_what_ansible_templates():
    doc = yaml.load('- name: "{{ a }} and {{ b }}"\n  when: x | bool\n  x: !unsafe "{{ c }}"\n  y: plain\n', Loader=_Loader)
    assert list(_expressions(doc)) == ["{{ a }}", "{{ b }}", "x | bool"]
    aliased = yaml.load('- args: &same {dest: "{{ d }}"}\n- args: *same\n- args: {dest: "{{ d }}"}\n', Loader=_Loader)
    assert list(_expressions(aliased)) == ["{{ d }}", "{{ d }}"]


def test_no_long_expression():
    long = ["%s: %d characters: %s" % (path, len(e), " ".join(e.split())[:120])
            for path, found in measure().items() for e in found if len(e) > MAX_EXPRESSION]
    assert not long, "compute these in Python (a filter or module) and only call it here:\n" + "\n".join(long)


def test_total_jinja_stays_small():
    total = sum(len(e) for found in measure().values() for e in found)
    assert 0 < total <= MAX_TOTAL, "%d characters of Jinja in roles/ and playbooks/ (at most %d)" % (total, MAX_TOTAL)


if __name__ == "__main__":
    per_role = collections.Counter()
    for path, found in measure().items():
        parts = pathlib.Path(path).parts
        per_role[parts[1] if parts[0] == "roles" else "playbooks"] += sum(len(e) for e in found)
    for name, size in per_role.most_common():
        print("%7d  %s" % (size, name))
    print("%7d  total (at most %d)" % (sum(per_role.values()), MAX_TOTAL))
