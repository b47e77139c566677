# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: benchmark_plan
short_description: Internal to the benchmark role - its baseline and module options, and the run's record
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Internal to the collection's C(benchmark) role, not an API - its phases and results may change in any release.
    The role hands over its settings by name (C(_benchmark_setting_names) in its C(vars/main.yml)), the phase, its
    results by name (C(_benchmark_result_names)) and the host's name; C(plugins/plugin_utils/_benchmark_report.py)
    decides.
  - Phase V(plan) (reads C(_benchmark_profiles), the baseline file's content) - the gate's baseline
    (C(benchmark_baseline) wins, else the profile C(benchmark_profile) when it was measured with the same dataset) and
    the options of M(llmops.sglang.benchmark) and M(llmops.sglang.accuracy_canary) (the canary's last good answers read
    from the host's report directory). The role keeps it as the fact C(_benchmark_plan).
  - Phase V(record) (reads C(_benchmark_result), C(_benchmark_canary) and the plan's gate note) - this run's history line,
    the earlier runs (C(history.jsonl) in C(benchmark_report_dir)/HOST), the JSON report, the summary and the verdicts.
positional: _input, phase, results, host
options:
  _input:
    description: The role's settings by variable name, every name of C(_benchmark_setting_names).
    type: dict
    required: true
  phase:
    description: What to decide.
    type: str
    required: true
    choices: [plan, record]
  results:
    description: The role's results by name, every name of C(_benchmark_result_names) (null for one that did not run).
    type: dict
    required: true
  host:
    description: The inventory host name (the chart's title, the host's report directory).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Choose the baseline and the modules' options
  ansible.builtin.set_fact:
    _benchmark_plan: "{{ _benchmark_settings | llmops.sglang.benchmark_plan('plan', _benchmark_results, inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: Phase V(plan) - C({baseline, options}); phase V(record) - the record.
  type: dict
  contains:
    baseline:
      description: "Phase V(plan) - C({ok, baseline, note, error}): the gate's baseline, why the gate is off when the
        profile was measured with another dataset, or (ok false) why none can be chosen."
      type: dict
    options:
      description: "Phase V(plan) - C({benchmark, accuracy_canary}), the two modules' options."
      type: dict
    entry:
      description: This run's history line (time, host, url, model, engine, dataset, tokens, tok/s and TTFT by level, gate, canary).
      type: dict
    history:
      description: The last C(benchmark_trend_runs) earlier runs.
      type: list
      elements: dict
    report:
      description: The JSON report (run, benchmark result without the chart, gate_note, canary result, trend).
      type: dict
    summary:
      description: One line for the end-of-play table.
      type: str
    stats:
      description: "C({host: summary}) for C(set_stats)."
      type: dict
    chart:
      description: The SVG chart; null when the benchmark made none.
      type: str
    png:
      description: Whether to render the chart as PNG (C(benchmark_render_png) and a chart).
      type: bool
    benchmark:
      description: "The benchmark's verdict C({judged, passed, msg}); judged when C(benchmark_fail) is on."
      type: dict
    canary:
      description: "The canary's verdict C({judged, passed, msg}); judged when C(benchmark_fail) is on and the canary ran."
      type: dict
"""

from ansible_collections.llmops.sglang.plugins.plugin_utils import _benchmark_report
from ansible_collections.llmops.sglang.plugins.plugin_utils._role_filter import role_filter

benchmark_plan = role_filter("benchmark_plan", _benchmark_report)


class FilterModule(object):
    def filters(self):
        return {"benchmark_plan": benchmark_plan}
