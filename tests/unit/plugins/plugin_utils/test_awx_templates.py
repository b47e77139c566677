# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lookup awx_job_templates on playbooks/awx.yml's own job templates and the real surveys under awx/surveys."""

import pathlib

import pytest
import yaml
from ansible.errors import AnsibleLookupError

from ansible_collections.llmops.sglang.plugins.lookup.awx_job_templates import LookupModule

ROOT = pathlib.Path(__file__).resolve().parents[4]


def _templates():
    loader = type("UnsafeLoader", (yaml.SafeLoader,), {})
    loader.add_constructor("!unsafe", lambda ld, node: ld.construct_scalar(node))
    return yaml.load((ROOT / "playbooks" / "awx.yml").read_text(), Loader=loader)[0]["vars"]["awx_job_templates"]  # noqa: S506


def run(terms, surveys=ROOT / "awx" / "surveys"):
    return LookupModule().run(terms, variables={}, root=str(ROOT), surveys=str(surveys))


def test_the_project_s_job_templates_get_their_surveys():
    templates = run(_templates())
    assert [t["playbook"] for t in templates] == ["site.yml", "playbooks/audit.yml", "playbooks/benchmark.yml"]
    assert all(t["present"] and t["survey_enabled"] for t in templates)
    audit = templates[1]
    assert audit["survey_spec"] == yaml.safe_load((ROOT / "awx" / "surveys" / "audit.yml").read_text())
    assert set(audit) == {"name", "description", "playbook", "job_type", "present", "survey_enabled", "survey_spec"}


def test_a_template_without_its_playbook_is_marked_and_an_empty_survey_is_off(tmp_path):
    (tmp_path / "empty.yml").write_text("name: Nothing to ask\ndescription: ''\nspec: []\n")
    entry = dict(_templates()[0], playbook="playbooks/not-yet.yml", survey="empty.yml")
    [t] = run([entry], tmp_path)
    assert t["present"] is False and t["survey_enabled"] is False and t["survey_spec"] is None


@pytest.mark.parametrize("entry, match", [
    ({"name": "x"}, "needs name, description, playbook, survey, job_type"),
    ("site.yml", "needs name"),
    ({"name": "x", "description": "d", "playbook": "site.yml", "survey": "missing.yml", "job_type": "run"}, "cannot read the survey"),
])
def test_a_bad_entry_is_named(entry, match):
    with pytest.raises(AnsibleLookupError, match=match):
        run([entry])


def test_root_and_surveys_are_required():
    with pytest.raises(AnsibleLookupError, match="needs root"):
        LookupModule().run(_templates(), variables={}, root=str(ROOT))
