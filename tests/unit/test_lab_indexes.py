# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every lab host that CI boots at the same time has its own lab index.

`make test` runs the molecule scenarios and the integration tests at once on one lab network. An index is a host's
address and its veth: two hosts on one index take each other's traffic (a router then reaches the wrong worker),
which showed only as a flaky router test. `lab up` refuses an index a running host holds; this test keeps the
scenarios' platforms and the integration tests' LAB_INDEXES apart before anything boots.
"""

import ast
import os
import pathlib
import subprocess

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAB = ROOT / "tests" / "lab" / "bin" / "lab"


def molecule_indexes():
    for path in sorted((ROOT / "extensions" / "molecule").glob("*/*/molecule.yml")):
        for platform in yaml.safe_load(path.read_text())["platforms"]:
            yield "%s (%s)" % (path.parent.relative_to(ROOT / "extensions" / "molecule"), platform["name"]), platform["index"]


def integration_indexes():
    for path in sorted((ROOT / "tests" / "integration").glob("test_*.py")):
        text = path.read_text()
        if "fleet.up(" not in text and 'lab("up' not in text:
            continue
        values = [ast.literal_eval(node.value) for node in ast.parse(text).body
                  if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["LAB_INDEXES"]]
        assert len(values) == 1, "%s boots lab hosts but declares no LAB_INDEXES tuple" % path.name
        for index in values[0]:
            yield path.name, index


def test_hosts_booted_at_once_have_their_own_index():
    claims = list(molecule_indexes()) + list(integration_indexes())
    assert len(claims) > 20 and all(isinstance(i, int) and 1 <= i <= 200 for _who, i in claims), claims
    owners = {}
    for who, index in claims:
        owners.setdefault(index, []).append(who)
    shared = dict((i, who) for i, who in owners.items() if len(who) > 1)
    assert shared == {}, "lab indexes booted by more than one host: %s" % shared


def test_lab_up_refuses_an_index_a_running_host_holds(tmp_path):
    """Run for real on a lab folder whose base counts as unpacked: the refusal comes before anything is made."""
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / ".unpacked").touch()
    (tmp_path / "id_ed25519").touch()
    (tmp_path / "run" / "other").mkdir(parents=True)
    (tmp_path / "run" / "other" / "index").write_text("77\n")
    run = subprocess.run([str(LAB), "up", "newhost", "77"], env=dict(os.environ, LLMOPS_LAB_DIR=str(tmp_path)),
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode != 0
    assert "index 77 is host other's" in run.stderr and "pick a free index or lab down that host" in run.stderr, run.stderr
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["other"]
