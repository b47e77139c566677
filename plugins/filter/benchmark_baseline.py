# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: benchmark_baseline
short_description: The baseline the benchmark role's gate uses
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - C(benchmark_baseline) when it is set; else the profile C(benchmark_profile) of the baseline file, whose numbers hold
    for the dataset it was measured with only (another dataset turns the gate off, with a note saying why).
positional: _input, profiles
options:
  _input:
    description: The benchmark role's settings by variable name (C(benchmark_baseline), C(benchmark_profile), C(benchmark_dataset)).
    type: dict
    required: true
  profiles:
    description: "The baseline file's content (C({profiles: {NAME: {dataset, output_tok_s}}})); null when not read."
    type: dict
"""

EXAMPLES = r"""
- name: Choose the baseline
  ansible.builtin.set_fact:
    baseline: "{{ {'benchmark_profile': 'p', 'benchmark_dataset': 'random', 'benchmark_baseline': none} | llmops.sglang.benchmark_baseline(profiles) }}"
"""

RETURN = r"""
_value:
  description: The choice.
  type: dict
  contains:
    ok:
      description: Whether a baseline (possibly none, with a note) could be chosen.
      type: bool
    baseline:
      description: Output tok/s by concurrency level; empty when the gate is off.
      type: dict
    note:
      description: Why the gate is off although a profile was chosen; empty otherwise.
      type: str
    error:
      description: Why no baseline can be chosen (the profile is not in the file) and how to fix it; empty otherwise.
      type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.module_utils.bench._prompts import BenchmarkError
from ansible_collections.llmops.sglang.plugins.plugin_utils._benchmark_report import choose_baseline


def benchmark_baseline(settings, profiles=None):
    try:
        return choose_baseline(settings, profiles)
    except BenchmarkError as exc:
        raise AnsibleFilterError("llmops.sglang.benchmark_baseline: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"benchmark_baseline": benchmark_baseline}
