# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to this collection's roles and plugins: runs on the controller only, not an API; it may change in
# any release without notice.
"""The AWX job templates of playbooks/awx.yml: which ones the project holds a playbook for, the survey each one gets
(AWX takes no survey_spec with an empty spec, so an empty survey means the survey is off), the notifications it sends
and the schedule that launches it."""

from __future__ import annotations

import re

KEYS = ("name", "description", "playbook", "survey", "job_type")
# AWX's job types: check runs ansible-playbook --check (a dry run).
JOB_TYPES = ("run", "check")
# AWX's schedule rule: a start (DTSTART, with or without a time zone) and an iCalendar RRULE, one space apart.
RRULE = re.compile(r"^DTSTART(;TZID=[A-Za-z0-9_/+-]+)?:\d{8}T\d{6}Z? RRULE:FREQ=(MINUTELY|HOURLY|DAILY|WEEKLY|MONTHLY|YEARLY)"
                   r"(;[A-Z]+=[A-Za-z0-9,+-]+)*$")


class TemplateError(ValueError):
    """A job template entry that is not one; the message names it and the keys it needs."""


def check_entry(entry):
    """TemplateError unless entry has every key a job template needs and a job type AWX knows."""
    if not isinstance(entry, dict) or [k for k in KEYS if not entry.get(k)]:
        raise TemplateError("awx_job_templates entry %r needs %s" % (entry, ", ".join(KEYS)))
    if entry["job_type"] not in JOB_TYPES:
        raise TemplateError("job template %s: job_type %r is not one of %s (check: a dry run)"
                            % (entry["name"], entry["job_type"], ", ".join(JOB_TYPES)))
    if not isinstance(entry.get("notify", False), bool):
        raise TemplateError("job template %s: notify must be true or false (whether its failures are notified), got %r"
                            % (entry["name"], entry["notify"]))


def schedule(entry):
    """The entry's schedule {name, rrule, enabled} ready for awx.awx.schedule, or None without one (no schedule key, or
    a null rrule: no schedule by configuration)."""
    wanted = entry.get("schedule")
    if wanted is not None and not isinstance(wanted, dict):
        raise TemplateError("job template %s: schedule must be a mapping {name, rrule[, enabled]}" % entry["name"])
    if not wanted or wanted.get("rrule") in (None, ""):
        return None
    rrule = wanted["rrule"]
    if not isinstance(rrule, str) or not RRULE.match(rrule):
        raise TemplateError("job template %s: schedule rrule %r is not AWX's rule: write "
                            "'DTSTART;TZID=UTC:20260101T060000 RRULE:FREQ=DAILY;INTERVAL=1' (a start, one space, an "
                            "iCalendar RRULE; the awx.awx.schedule_rrule lookup builds one)" % (entry["name"], rrule))
    enabled = wanted.get("enabled", True)
    if not isinstance(enabled, bool):
        raise TemplateError("job template %s: schedule enabled must be true or false, got %r" % (entry["name"], enabled))
    return {"name": wanted.get("name") or "%s (schedule)" % entry["name"], "rrule": rrule, "enabled": enabled}


def notification_name(notification):
    """The name of the notification template (awx_notification_template: a mapping with a name, or None)."""
    if notification in (None, "", {}):
        return None
    if not isinstance(notification, dict) or not notification.get("name") or not notification.get("notification_type"):
        raise TemplateError("awx_notification_template needs name, notification_type and notification_configuration "
                            "(awx.awx.notification_template's options), or null for none")
    return notification["name"]


def job_template(entry, playbook_exists, survey, notification=None):
    """One entry of awx_job_templates made ready for awx.awx.job_template and awx.awx.schedule.

    playbook_exists: whether the project holds its playbook; survey: its survey file's content (a dict); notification:
    awx_notification_template, whose name a template with notify gets its failures sent to (None: none).
    Returns {name, description, playbook, job_type, present, survey_enabled, survey_spec, notify_error, schedule};
    survey_spec is None when the survey asks nothing; notify_error lists the notification templates of its failures
    (awx.awx.job_template's notification_templates_error); schedule is schedule()'s.
    """
    check_entry(entry)
    name = notification_name(notification)
    if not isinstance(survey, dict) or not isinstance(survey.get("spec") or [], list):
        raise TemplateError("survey %s of job template %s is not a survey (name, description, spec: a list of "
                            "questions)" % (entry["survey"], entry["name"]))
    asks = len(survey.get("spec") or []) > 0
    return dict(((k, entry[k]) for k in ("name", "description", "playbook", "job_type")), present=bool(playbook_exists),
                survey_enabled=asks, survey_spec=survey if asks else None,
                notify_error=[name] if name and entry.get("notify") else [], schedule=schedule(entry))
