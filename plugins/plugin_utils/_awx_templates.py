# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to this collection's roles and plugins: runs on the controller only, not an API; it may change in
# any release without notice.
"""The AWX job templates of playbooks/awx.yml: which ones the project holds a playbook for, and the survey each
one gets (AWX takes no survey_spec with an empty spec, so an empty survey means the survey is off)."""

from __future__ import annotations

KEYS = ("name", "description", "playbook", "survey", "job_type")


class TemplateError(ValueError):
    """A job template entry that is not one; the message names it and the keys it needs."""


def check_entry(entry):
    """TemplateError unless entry has every key a job template needs."""
    if not isinstance(entry, dict) or [k for k in KEYS if not entry.get(k)]:
        raise TemplateError("awx_job_templates entry %r needs %s" % (entry, ", ".join(KEYS)))


def job_template(entry, playbook_exists, survey):
    """One entry of awx_job_templates made ready for awx.awx.job_template.

    playbook_exists: whether the project holds its playbook; survey: its survey file's content (a dict).
    Returns {name, description, playbook, job_type, present, survey_enabled, survey_spec}; survey_spec is None when
    the survey asks nothing.
    """
    check_entry(entry)
    if not isinstance(survey, dict) or not isinstance(survey.get("spec") or [], list):
        raise TemplateError("survey %s of job template %s is not a survey (name, description, spec: a list of "
                            "questions)" % (entry["survey"], entry["name"]))
    asks = len(survey.get("spec") or []) > 0
    return dict(((k, entry[k]) for k in ("name", "description", "playbook", "job_type")), present=bool(playbook_exists),
                survey_enabled=asks, survey_spec=survey if asks else None)
