# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: benchmark_options
short_description: The options the benchmark role gives its two modules
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Maps the benchmark role's settings to the options of M(llmops.sglang.benchmark) and
    M(llmops.sglang.accuracy_canary) (for C(module_defaults)); optional settings left empty are left out.
  - Both modules report failures in their result (C(fail_on_regression) and C(fail_on_failure) off); the role writes
    its reports first and fails afterwards.
positional: _input, host, baseline
options:
  _input:
    description: The benchmark role's settings by variable name (C(benchmark_url), ...).
    type: dict
    required: true
  host:
    description:
      - The inventory host name, for the chart's title and the host's report directory (C(benchmark_report_dir)/HOST);
        the canary's last good answers there (C(canary-state.json)), when they exist, become the canary's
        O(llmops.sglang.accuracy_canary#module:previous).
    type: str
  baseline:
    description: The gate's baseline (P(llmops.sglang.benchmark_baseline#filter)'s C(baseline)).
    type: dict
"""

EXAMPLES = r"""
- name: Measure
  llmops.sglang.benchmark:
  module_defaults:
    llmops.sglang.benchmark: "{{ (settings | llmops.sglang.benchmark_options(inventory_hostname, {'1': 172})).benchmark }}"
"""

RETURN = r"""
_value:
  description: The options of each module.
  type: dict
  contains:
    benchmark:
      description: Options of M(llmops.sglang.benchmark).
      type: dict
    accuracy_canary:
      description: Options of M(llmops.sglang.accuracy_canary).
      type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.module_utils.bench._prompts import BenchmarkError
from ansible_collections.llmops.sglang.plugins.plugin_utils._benchmark_report import module_options


def benchmark_options(settings, host=None, baseline=None):
    try:
        return module_options(settings, host, baseline)
    except BenchmarkError as exc:
        raise AnsibleFilterError("llmops.sglang.benchmark_options: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"benchmark_options": benchmark_options}
