#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_service_stop
short_description: Stop an SGLang systemd unit and prove that none of its processes survived
version_added: 0.1.0
description:
  - Lists the processes of the unit's control group, runs C(systemctl stop) (SIGTERM to the whole group with
    C(KillMode=control-group), SIGKILL after C(TimeoutStopSec)), then checks that none of those processes and
    nothing else in the group is still alive.
  - A process that ignored SIGTERM and had to be killed (a surviving child, for example a scheduler process) is
    named with its pid and command line from systemd's own journal messages of that invocation; by default that
    is a warning, with O(fail_on_kill=true) a failure.
  - systemd's own messages are told by the fields journald sets (C(_PID=1), C(_UID=0), C(_TRANSPORT=journal)); an
    entry with C(INVOCATION_ID=) or C(SYSLOG_IDENTIFIER=systemd) sent by any other process (C(logger --journald))
    changes nothing in the report.
  - A process still alive after the stop (stuck in the kernel, or moved out of the group) always fails the task,
    since it may still hold GPU memory.
  - Values of secret flags (C(--api-key)) are masked in the command lines returned.
author:
  - llmops maintainers (@llmops)
extends_documentation_fragment:
  - llmops.sglang.attributes
attributes:
  check_mode:
    support: full
    details:
      - In check mode the unit is not stopped; C(changed) says whether it would be.
  diff_mode:
    support: none
options:
  unit:
    description: The systemd unit, for example C(sglang-qwen.service).
    type: str
    required: true
  fail_on_kill:
    description: Fail when systemd had to SIGKILL a process of the unit after C(TimeoutStopSec).
    type: bool
    default: false
  timeout:
    description: Seconds to wait for C(systemctl stop); unset is twice the unit's C(TimeoutStopSec) plus 30.
    type: int
seealso:
  - module: llmops.sglang.sglang_wait_ready
"""

EXAMPLES = r"""
- name: Stop the server cleanly (fails if a process survives the stop)
  llmops.sglang.sglang_service_stop:
    unit: sglang-qwen.service
  register: stop

- name: Treat a child that ignores SIGTERM as an error
  llmops.sglang.sglang_service_stop:
    unit: sglang-qwen.service
    fail_on_kill: true
"""

RETURN = r"""
was_active:
  description: The unit was running (or had processes) before the stop.
  returned: always
  type: bool
duration:
  description: Seconds C(systemctl stop) took.
  returned: always
  type: float
invocation_id:
  description: The invocation that was stopped.
  returned: always
  type: str
processes:
  description: The unit's processes before the stop, each C(pid), C(comm), C(cmdline) (secrets masked), C(start).
  returned: always
  type: list
  elements: dict
killed:
  description: Processes systemd killed with SIGKILL after C(TimeoutStopSec), each C(pid), C(comm), C(cmdline).
  returned: always
  type: list
  elements: dict
  sample: [{"pid": 306, "comm": "python3", "cmdline": "/usr/bin/python3 -c ... sglang::scheduler_TP0"}]
timed_out_state:
  description: The stop state that timed out (C(stop-sigterm), C(final-sigterm)), or null.
  returned: always
  type: str
survivors:
  description: Processes still alive after the stop.
  returned: always
  type: list
  elements: dict
result:
  description: systemd's C(Result) of the unit after the stop (C(timeout) when something had to be killed).
  returned: always
  type: str
timeout_stop_sec:
  description: The unit's C(TimeoutStopSec) in seconds (null when infinite).
  returned: always
  type: float
unit:
  description: The unit's state after the stop.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.sglang.plugins.module_utils._service_stop import UnitError, describe_stop, stop_unit


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type="str", required=True),
            fail_on_kill=dict(type="bool", default=False),
            timeout=dict(type="int"),
        ),
        supports_check_mode=True,
    )
    unit = module.params["unit"]
    if module.params["timeout"] is not None and module.params["timeout"] <= 0:
        module.fail_json(msg="timeout must be a positive number of seconds, got %s" % module.params["timeout"])
    try:
        report = stop_unit(unit, check_mode=module.check_mode, timeout=module.params["timeout"],
                           systemctl=module.get_bin_path("systemctl", required=True),
                           journalctl=module.get_bin_path("journalctl", required=True))
    except UnitError as exc:
        module.fail_json(msg=str(exc))
    problem = describe_stop(unit, report)
    if report["survivors"] or (report["killed"] and module.params["fail_on_kill"]):
        module.fail_json(msg=problem, **report)
    if problem:
        module.warn(problem)
    if not report["was_active"] and not report["processes"]:
        msg = "%s was not running" % unit
    elif module.check_mode:
        msg = "%s would be stopped" % unit
    else:
        msg = "%s stopped in %.1f s; no process survived" % (unit, report["duration"])
    if problem:
        msg = "%s; %s" % (msg, problem)
    module.exit_json(msg=msg, **report)


if __name__ == "__main__":
    main()
