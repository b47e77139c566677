# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark chart: valid SVG with every point."""

import xml.etree.ElementTree as ET

from ansible_collections.llmops.sglang.plugins.module_utils.bench import _chart as bc


def test_chart_is_valid_svg_with_every_point():
    levels = [{"concurrency": 1, "aggregate_output_tok_s": 171.2, "per_request_output_tok_s": {"mean": 171.9},
               "ttft_ms": {"p50": 80.0, "p99": 95.0}, "itl_ms": {"p50": 5.8, "p99": 7.1}},
              {"concurrency": 32, "aggregate_output_tok_s": 2133.0, "per_request_output_tok_s": {"mean": 66.7},
               "ttft_ms": {"p50": 120.0, "p99": 300.0}, "itl_ms": {"p50": 15.0, "p99": 30.0}}]
    svg = bc.render_chart(levels, {1: 172, 32: 2100}, 0.9, "host <a&b>", "sub")
    root = ET.fromstring(svg.split("\n", 1)[1])
    ns = "{http://www.w3.org/2000/svg}"
    texts = [t.text for t in root.iter(ns + "text")]
    assert "host <a&b>" in texts  # escaped in the file, intact once parsed
    # 2 measured points per panel x (2 throughput panels + 4 latency series)
    assert len(list(root.iter(ns + "circle"))) == 12
    assert "2133" in texts and "172" in texts and "gate: 90% of baseline" in texts
    assert bc.render_chart([], title="empty").count("no measured level") == 1
