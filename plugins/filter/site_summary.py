# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: site_summary
short_description: The end-of-play table of site.yml
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - One line per host with what each role concluded, under a header; V(n/a) where a role did not run.
  - "Read from each host's variables: C(gpu_preflight_result) (preflight verdict and failed rules),
    C(audit_guard) (KV guard verdict), C(sglang_server_info) (ready, restarted, ready after, node of a multi-node
    model), C(sglang_site_report) (configuration and outcome, M(llmops.sglang.host_report) filter) and
    C(benchmark_summary)."
positional: _input, hostvars
options:
  _input:
    description: The hosts, in the order of the table.
    type: list
    elements: str
    required: true
  hostvars:
    description: C(hostvars).
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Print one line per host
  ansible.builtin.debug:
    msg: "{{ ansible_play_hosts_all | llmops.sglang.site_summary(hostvars) | join('\n') }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: The header and one line per host.
  type: list
  elements: str
"""

from ansible_collections.llmops.sglang.plugins.plugin_utils._site_report import summary_lines


class FilterModule(object):
    def filters(self):
        return {"site_summary": summary_lines}
