# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller CPU time and wall time per task, for profiling a play (tests/bench/profile_site.py).

CPU is the controller process's own time plus that of the workers it has reaped (each worker's SSH and
module transfer included), read at each task's start: the difference between two task starts is the
previous task's cost on the controller, over all hosts of the batch. At the end of the play it writes
TASK_CPU_JSON (a path from the environment) with one entry per task name, summed over its runs."""

from __future__ import annotations

DOCUMENTATION = """
name: task_cpu
type: aggregate
short_description: controller CPU and wall time per task (profiling aid for the repository's benchmarks)
description: Writes the per-task sums to the file named by the TASK_CPU_JSON environment variable.
"""

import json
import os
import resource
import time

from ansible.plugins.callback import CallbackBase


def _cpu():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_cpu"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._current = None
        self._tasks = {}

    def _close(self):
        if self._current:
            name, cpu0, wall0 = self._current
            entry = self._tasks.setdefault(name, {"task": name, "runs": 0, "cpu_s": 0.0, "wall_s": 0.0})
            entry["runs"] += 1
            entry["cpu_s"] += _cpu() - cpu0
            entry["wall_s"] += time.monotonic() - wall0
        self._current = None

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._close()
        self._current = (task.get_name(), _cpu(), time.monotonic())

    v2_playbook_on_handler_task_start = v2_playbook_on_task_start

    def v2_playbook_on_stats(self, stats):
        self._close()
        path = os.environ.get("TASK_CPU_JSON")
        if path:
            with open(path, "w", encoding="utf-8") as out:
                json.dump(sorted(self._tasks.values(), key=lambda e: -e["cpu_s"]), out, indent=1)
