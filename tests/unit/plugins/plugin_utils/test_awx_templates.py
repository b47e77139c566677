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


def _play_vars():
    loader = type("UnsafeLoader", (yaml.SafeLoader,), {})
    loader.add_constructor("!unsafe", lambda ld, node: ld.construct_scalar(node))
    return yaml.load((ROOT / "playbooks" / "awx.yml").read_text(), Loader=loader)[0]["vars"]  # noqa: S506


def _templates(**play_vars):
    """The play's awx_job_templates with its variables filled in (the schedule's rule and switch), as Ansible would."""
    values = dict(_play_vars(), **play_vars)
    out = []
    for entry in values["awx_job_templates"]:
        entry = dict(entry)
        if "schedule" in entry:
            entry["schedule"] = dict(entry["schedule"], rrule=values["awx_audit_rrule"], enabled=values["awx_audit_schedule_enabled"])
        out.append(entry)
    return out


def run(terms, surveys=ROOT / "awx" / "surveys", notification=None):
    return LookupModule().run(terms, variables={}, root=str(ROOT), surveys=str(surveys), notify=notification)


def test_the_project_s_job_templates_get_their_surveys():
    templates = run(_templates())
    assert [t["playbook"] for t in templates] == ["site.yml", "playbooks/audit.yml", "playbooks/audit.yml", "playbooks/benchmark.yml"]
    assert all(t["present"] and t["survey_enabled"] for t in templates)
    audit = templates[1]
    assert audit["survey_spec"] == yaml.safe_load((ROOT / "awx" / "surveys" / "audit.yml").read_text())
    assert set(audit) == {"name", "description", "playbook", "job_type", "present", "survey_enabled", "survey_spec",
                          "notify_error", "schedule"}


def test_the_audit_has_a_dry_run_in_check_mode_and_a_daily_schedule():
    templates = {t["name"]: t for t in run(_templates())}
    run_, check = templates["llmops.sglang audit"], templates["llmops.sglang audit (check)"]
    assert (run_["job_type"], check["job_type"]) == ("run", "check")
    assert (run_["playbook"], run_["survey_spec"]) == (check["playbook"], check["survey_spec"])
    assert run_["schedule"] == {"name": "llmops.sglang re-audit", "enabled": True,
                                "rrule": "DTSTART;TZID=UTC:20260101T060000 RRULE:FREQ=DAILY;INTERVAL=1"}
    assert [t["name"] for t in templates.values() if t["schedule"]] == ["llmops.sglang audit"]
    # configurable: another rule, paused, or none at all
    weekly = "DTSTART:20260105T020000Z RRULE:FREQ=WEEKLY;BYDAY=MO;INTERVAL=1"
    assert run(_templates(awx_audit_rrule=weekly, awx_audit_schedule_enabled=False))[1]["schedule"]["rrule"] == weekly
    assert run(_templates(awx_audit_schedule_enabled=False))[1]["schedule"]["enabled"] is False
    assert run(_templates(awx_audit_rrule=None))[1]["schedule"] is None


def test_the_audits_failures_go_to_the_notification_template_when_there_is_one():
    assert all(t["notify_error"] == [] for t in run(_templates()))
    hook = {"name": "sglang audit", "notification_type": "webhook", "notification_configuration": {"url": "https://hooks.invalid/x"}}
    notified = {t["name"]: t["notify_error"] for t in run(_templates(), notification=hook)}
    assert notified == {"llmops.sglang deploy": [], "llmops.sglang audit": ["sglang audit"],
                        "llmops.sglang audit (check)": ["sglang audit"], "llmops.sglang benchmark": []}
    with pytest.raises(AnsibleLookupError, match="awx_notification_template needs name, notification_type"):
        run(_templates(), notification={"name": "no type"})


@pytest.mark.parametrize("rrule", ["daily", "RRULE:FREQ=DAILY", "DTSTART;TZID=UTC:20260101T060000 RRULE:FREQ=SOMETIMES",
                                   "DTSTART;TZID=UTC:20260101T060000\nRRULE:FREQ=DAILY", 42])
def test_a_schedule_rule_awx_would_refuse_is_named_with_the_fix(rrule):
    with pytest.raises(AnsibleLookupError, match="is not AWX's rule: write 'DTSTART;TZID=UTC:20260101T060000 RRULE:FREQ=DAILY"):
        run(_templates(awx_audit_rrule=rrule))


def test_a_template_without_its_playbook_is_marked_and_an_empty_survey_is_off(tmp_path):
    (tmp_path / "empty.yml").write_text("name: Nothing to ask\ndescription: ''\nspec: []\n")
    entry = dict(_templates()[0], playbook="playbooks/not-yet.yml", survey="empty.yml")
    [t] = run([entry], tmp_path)
    assert t["present"] is False and t["survey_enabled"] is False and t["survey_spec"] is None


@pytest.mark.parametrize("entry, match", [
    ({"name": "x"}, "needs name, description, playbook, survey, job_type"),
    ("site.yml", "needs name"),
    ({"name": "x", "description": "d", "playbook": "site.yml", "survey": "deploy.yml", "job_type": "dry"}, "job_type 'dry' is not one of run, check"),
    ({"name": "x", "description": "d", "playbook": "site.yml", "survey": "deploy.yml", "job_type": "run", "notify": "error"},
     "notify must be true or false"),
    ({"name": "x", "description": "d", "playbook": "site.yml", "survey": "deploy.yml", "job_type": "run", "schedule": "daily"},
     "schedule must be a mapping"),
    ({"name": "x", "description": "d", "playbook": "site.yml", "survey": "missing.yml", "job_type": "run"}, "cannot read the survey"),
])
def test_a_bad_entry_is_named(entry, match):
    with pytest.raises(AnsibleLookupError, match=match):
        run([entry])


def test_root_and_surveys_are_required():
    with pytest.raises(AnsibleLookupError, match="needs root"):
        LookupModule().run(_templates(), variables={}, root=str(ROOT))
