#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: verdict_metrics
short_description: Write a verdict of the collection as Prometheus metrics for node_exporter's textfile collector
version_added: 0.1.0
description:
  - Turns the KV cache guard's record, the GPU preflight's verdict or the accuracy canary's result into Prometheus
    metrics (C(llmops_sglang_*), gauges) and puts them in O(dir)C(/llmops_sglang_)O(source)C(.prom), the file
    node_exporter's textfile collector reads.
  - The file is written atomically, through a temporary file in the same directory that is flushed to disk and renamed
    over it, with mode C(0644) (node_exporter runs as the C(prometheus) user), and only when its text differs. The text
    holds the verdict only, never the time of the run, so a second run with the same verdict reports no change.
  - Every run that is not in check mode sets the file's modification time, also when the text is the same;
    node_exporter exports it as C(node_textfile_mtime_seconds), and the collection's alert rules call a verdict stale
    from it. Setting the time alone is not reported as a change.
  - When O(dir) does not exist, nothing is written and RV(not_written) says why (node_exporter's textfile collector is
    not set up on the host); the task does not fail.
  - Label values are escaped as the text format requires; metric and label names are checked before anything is
    written.
author:
  - llmops maintainers (@llmops)
extends_documentation_fragment:
  - llmops.sglang.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reports whether the file would change; writes nothing and leaves its modification time alone.
  diff_mode:
    support: full
    details:
      - Shows the file's old and new text when it changes.
options:
  source:
    description:
      - Which verdict O(result) is. Each gives its own file and metrics (see docs/monitoring.md).
      - V(kv_guard) takes the audit role's C(audit_guard) or M(llmops.sglang.kv_cache_guard)'s result, V(gpu_preflight)
        the gpu_preflight role's C(gpu_preflight_result), V(canary) M(llmops.sglang.accuracy_canary)'s result.
    type: str
    required: true
    choices: [canary, gpu_preflight, kv_guard]
  result:
    description:
      - The verdict, as the task or role that decided it registered it.
    type: dict
    required: true
  labels:
    description:
      - 'Labels added to every sample, for example C({unit: sglang-qwen}). Prometheus adds C(instance) and C(job) itself.'
      - Values are strings or numbers; a null value adds no label (a server audited from a log file has no unit).
    type: dict
    default: {}
  dir:
    description:
      - The directory node_exporter's textfile collector reads (its C(--collector.textfile.directory)).
      - The default is the one the Debian and Ubuntu package C(prometheus-node-exporter) reads.
      - Null or an empty string writes nothing (metrics off); RV(not_written) says so.
    type: path
    default: /var/lib/prometheus/node-exporter
notes:
  - 'Writing to the default directory needs root (C(become: true)); the directory belongs to root.'
seealso:
  - name: node_exporter textfile collector
    description: How node_exporter reads C(*.prom) files.
    link: https://github.com/prometheus/node_exporter#textfile-collector
"""

EXAMPLES = r"""
- name: Publish the KV cache guard's verdict for Prometheus
  llmops.sglang.verdict_metrics:
    source: kv_guard
    result: "{{ audit_guard }}"
    labels:
      unit: sglang-qwen

- name: Publish the GPU preflight's verdict to a custom textfile directory
  llmops.sglang.verdict_metrics:
    source: gpu_preflight
    result: "{{ gpu_preflight_result }}"
    dir: /var/lib/node_exporter/textfile_collector
"""

RETURN = r"""
path:
  description: The metrics file.
  returned: always
  type: str
  sample: /var/lib/prometheus/node-exporter/llmops_sglang_kv_guard.prom
text:
  description: The text the file holds (or would hold).
  returned: always
  type: str
  sample: |
    # HELP llmops_sglang_kv_guard_ok 1 when the KV cache guard passed ...
    # TYPE llmops_sglang_kv_guard_ok gauge
    llmops_sglang_kv_guard_ok{expected_kv_dtype="bf16",kv_dtype="bf16",unit="sglang-qwen"} 1
written:
  description: Whether the file was written in this run.
  returned: always
  type: bool
heartbeat:
  description: Whether only the file's modification time was set (the text was already right).
  returned: always
  type: bool
not_written:
  description: Why nothing was written (the directory is missing); null when the file is in place.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils._verdict_metrics import (
    DEFAULT_DIR,
    SOURCES,
    MetricsError,
    publish,
    text,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type="str", required=True, choices=sorted(SOURCES)),
            result=dict(type="dict", required=True),
            labels=dict(type="dict", default={}),
            dir=dict(type="path", default=DEFAULT_DIR),  # null: metrics off
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        content = text(p["source"], p["result"], p["labels"])
        out = publish(p["dir"], p["source"], content, module.check_mode)
    except MetricsError as exc:
        module.fail_json(msg=str(exc))
    result = {"changed": out["changed"], "path": out["path"], "text": content, "written": out["written"],
              "heartbeat": out["heartbeat"], "not_written": out["not_written"]}
    if module._diff and out["changed"]:
        result["diff"] = {"before": out["before"] or "", "after": content, "before_header": out["path"],
                          "after_header": out["path"]}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
