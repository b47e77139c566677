# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: benchmark_record
short_description: The benchmark role's record of one run
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - "From the role's settings and the results of M(llmops.sglang.benchmark) and M(llmops.sglang.accuracy_canary):
    the history entry, the earlier runs kept for the trend, the JSON report, the end-of-play summary and the verdicts."
positional: _input, result, canary, host, gate_note
options:
  _input:
    description: The benchmark role's settings by variable name (C(benchmark_url), C(benchmark_trend_runs), ...).
    type: dict
    required: true
  result:
    description: The registered result of M(llmops.sglang.benchmark).
    type: dict
    required: true
  canary:
    description: The registered result of M(llmops.sglang.accuracy_canary); null when the canary did not run.
    type: dict
  host:
    description:
      - The inventory host name; the C(history.jsonl) of its report directory (C(benchmark_report_dir)/HOST, one JSON
        object a line) holds the earlier runs.
    type: str
  gate_note:
    description: Why the gate is off although a profile was chosen (P(llmops.sglang.benchmark_baseline#filter)'s note).
    type: str
"""

EXAMPLES = r"""
- name: Assemble this run's record
  ansible.builtin.set_fact:
    record: "{{ settings | llmops.sglang.benchmark_record(result, canary, inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: The record.
  type: dict
  contains:
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

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.module_utils.bench._prompts import BenchmarkError
from ansible_collections.llmops.sglang.plugins.plugin_utils._benchmark_report import run_record


def benchmark_record(settings, result, canary=None, host=None, gate_note=""):
    try:
        return run_record(settings, result, canary, host, gate_note)
    except BenchmarkError as exc:
        raise AnsibleFilterError("llmops.sglang.benchmark_record: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"benchmark_record": benchmark_record}
