# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to this collection's roles and plugins: runs on the controller only, not an API; it may change in
# any release without notice.
"""The one shape of a role's filter (llmops.sglang.ROLE_plan): the role's settings by name, a phase, the phase's inputs.

Each role's plan module (``_ROLE_plan.py``, ``_audit_checks.py``, ...) exports SETTINGS (the names the role's
``vars/main.yml`` lists as ``_ROLE_setting_names``), PHASES (phase name -> function taking the settings first) and
ERRORS (its own error classes, reported as the filter's error with the cause and the fix). The results come as one
mapping, every name of ``_ROLE_result_names``; ``registered`` reads one of them.
"""

from __future__ import annotations

import hashlib
import inspect
import json

from ansible.errors import AnsibleFilterError


def registered(results, name):
    """One of the role's results by name: the empty mapping its vars/main.yml gives for one not registered yet (the
    vars lookup's default) reads as None."""
    value = (results or {}).get(name)
    return None if isinstance(value, dict) and not value else value


def ran(result):
    """Whether a registered result is from a task that ran (not skipped, not absent)."""
    return isinstance(result, dict) and not result.get("skipped")


def cache_key(inputs):
    """sha256 of a build's inputs as Ansible's ``to_json(sort_keys=True)`` writes them (the roles' stamps hold such keys)."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode("utf-8")).hexdigest()


def role_filter(name, plan_module):
    """The filter function ``name``: ``settings | llmops.sglang.NAME(phase, *inputs, **named_inputs)``."""
    phases, errors = plan_module.PHASES, plan_module.ERRORS

    def run(settings, phase, *inputs, **named):
        fn = phases.get(phase) if isinstance(phase, str) else None
        if fn is None:
            raise AnsibleFilterError("llmops.sglang.%s: unknown phase %r: use one of %s" % (name, phase, ", ".join(phases)))
        try:
            inspect.signature(fn).bind(settings, *inputs, **named)
        except TypeError as exc:
            raise AnsibleFilterError("llmops.sglang.%s('%s'): %s: pass %s" % (name, phase, exc, inspect.signature(fn)))
        try:
            return fn(settings, *inputs, **named)
        except errors as exc:
            raise AnsibleFilterError("llmops.sglang.%s: %s" % (name, exc))

    run.__name__ = name
    return run
