# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The plan-as-a-fact convention of the roles with a plan (sgl_kernel, fp4_kernels), read from their task files."""

import json

import yaml


def tasks(path):
    """The tasks of a file in order, a block's own tasks in its place."""
    for task in yaml.safe_load(path.read_text()) or []:
        yield from (x for part in ("block", "rescue", "always") for x in task.get(part, [])) if "block" in task else [task]


def stale_reads(role, fact, results, record):
    """Tasks that read the fact between a result the plan follows (a name in RESULTS registered, or the fact RECORD set)
    and the next import of plan.yml: they would read a plan without that result. A changed_when judges its own task's
    result and reads the plan fresh, so it does not count."""
    stale_ones = []
    for path in sorted((role / "tasks").glob("*.yml")):
        stale = None
        for task in tasks(path):
            if task.get("ansible.builtin.import_tasks") == "plan.yml":
                stale = None
                continue
            text = json.dumps({k: v for k, v in task.items() if k not in ("register", "changed_when")})
            if stale is not None and fact + "." in text:
                stale_ones.append("%s: %r reads the plan before it follows %s" % (path.name, task["name"], stale))
            if task.get("register") in results:
                stale = task["register"]
            if record in task.get("ansible.builtin.set_fact", {}):
                stale = record
    return stale_ones
