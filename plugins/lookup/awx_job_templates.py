# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: awx_job_templates
short_description: The AWX job templates of this project, each with its survey
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - For each job template entry, says whether the project tree on the controller holds its playbook and loads its
    survey file, ready for M(awx.awx.job_template). A survey that asks nothing turns the survey off.
  - Checks the job type (C(run), or C(check) for a dry run), and its schedule's rule, ready for M(awx.awx.schedule).
options:
  _terms:
    description:
      - Job template entries C({name, description, playbook, survey, job_type}), optionally with C(notify) (true sends its
        failures to O(notify)) and C(schedule) (C({name, rrule, enabled}), none with a null C(rrule)).
      - C(rrule) is AWX's rule, a start and an iCalendar RRULE, for example
        C(DTSTART;TZID=UTC:20260101T060000 RRULE:FREQ=DAILY;INTERVAL=1).
    type: list
    elements: dict
    required: true
  root:
    description: The project tree on the controller (playbooks are relative to it).
    type: path
    required: true
  surveys:
    description: The directory of the survey files (C(survey) is relative to it).
    type: path
    required: true
  notify:
    description:
      - The notification template (C({name, notification_type, notification_configuration}), as
        M(awx.awx.notification_template) takes it) that the failures of the entries with C(notify) go to; unset, none.
    type: dict
"""

EXAMPLES = r"""
- name: Create the job templates whose playbook the project holds
  awx.awx.job_template:
    name: "{{ item.name }}"
    playbook: "{{ item.playbook }}"
    survey_enabled: "{{ item.survey_enabled }}"
    survey_spec: "{{ item.survey_spec or omit }}"
  loop: "{{ q('llmops.sglang.awx_job_templates', *awx_job_templates, root=playbook_dir ~ '/..', surveys='awx/surveys') }}"
  when: item.present
"""

RETURN = r"""
_list:
  description: One entry per job template.
  type: list
  elements: dict
  contains:
    name:
      description: The job template's name.
      type: str
    description:
      description: Its description.
      type: str
    playbook:
      description: Its playbook, relative to the project.
      type: str
    job_type:
      description: Its job type.
      type: str
    present:
      description: Whether the project holds the playbook (a template without one is skipped).
      type: bool
    survey_enabled:
      description: Whether the survey asks anything.
      type: bool
    survey_spec:
      description: The survey (name, description, spec); null when it asks nothing.
      type: dict
    notify_error:
      description: The notification templates its failures go to (empty without O(notify) or the entry's C(notify)).
      type: list
      elements: str
    schedule:
      description: The schedule (C(name), C(rrule), C(enabled)); null when it has none.
      type: dict
"""

import os

import yaml
from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.llmops.sglang.plugins.plugin_utils._awx_templates import TemplateError, check_entry, job_template


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        root, surveys = kwargs.get("root"), kwargs.get("surveys")
        if not root or not surveys:
            raise AnsibleLookupError("awx_job_templates needs root (the project tree) and surveys (the survey directory)")
        result = []
        for entry in terms:
            try:
                check_entry(entry)
                path = os.path.join(surveys, entry["survey"])
                try:
                    with open(path, encoding="utf-8") as f:
                        survey = yaml.safe_load(f)
                except (OSError, yaml.YAMLError) as exc:
                    raise AnsibleLookupError("cannot read the survey %s: %s" % (path, exc))
                result.append(job_template(entry, os.path.isfile(os.path.join(root, entry["playbook"])), survey,
                                           kwargs.get("notify") or None))
            except TemplateError as exc:
                raise AnsibleLookupError(str(exc))
        return result
