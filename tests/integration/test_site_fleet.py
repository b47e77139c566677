# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""site.yml on a fleet of 4 lab hosts in one batch: it deploys, and its no-change re-run reports changed=0 everywhere.

Four hosts prove the batch (forks, one serial batch, one configuration everywhere) at half the CPU of eight on CI's two
cores; how the time grows to 8 and 100 hosts is `make bench-scale`'s measurement (docs/scaling.md). Uses the same
fleet helper as tests/bench/bench_scale.py (tests/lab/fleet.py) and the same hosts (scale1..scale4, lab indexes
121..124): do not run both at once. Tears down only its own hosts.
"""

from __future__ import annotations

import fleet

# Lab indexes no molecule scenario or other integration test boots (tests/unit/test_lab_indexes.py).
LAB_INDEXES = (121, 122, 123, 124)
HOSTS = fleet.host_names("scale", len(LAB_INDEXES))
FIRST_INDEX = LAB_INDEXES[0]


def test_site_rerun_on_a_fleet_changes_nothing(tmp_path):
    assert (fleet.ROOT / ".cache" / "sglang-venv" / "bin" / "python").exists(), "the drift check needs .cache/sglang-venv: run make setup"
    booted = fleet.up(HOSTS, FIRST_INDEX, "rtxpro6000x8")
    try:
        assert sorted(h["name"] for h in booted) == sorted(HOSTS)
        fleet.stage_wheelhouse(HOSTS)
        inventory = fleet.write_inventory(tmp_path / "inventory.json", HOSTS)

        first = fleet.run_site(inventory, serial=4, forks=4, pipelining=True, log_path=tmp_path / "first.log")
        assert first.problems(HOSTS, rerun=False) == [], first.output[-4000:]
        # A first deploy installs and starts every server: each host changed and was (re)started.
        assert all(first.recap[h]["changed"] > 0 and first.summary[h]["restarted"] for h in HOSTS), first.recap

        again = fleet.run_site(inventory, serial=4, forks=4, pipelining=True, log_path=tmp_path / "rerun.log")
        assert sorted(again.recap) == sorted(HOSTS), again.output[-4000:]
        assert {h: (r["changed"], r["failed"], r["unreachable"]) for h, r in again.recap.items()} == {h: (0, 0, 0) for h in HOSTS}, \
            again.output[-4000:]
        assert again.problems(HOSTS, rerun=True) == [], again.output[-4000:]
        assert {h: again.summary[h]["kv"] for h in HOSTS} == {h: "bf16" for h in HOSTS}
        # Each host reports what it runs, read back from the host: one configuration everywhere, deployed then unchanged.
        digests = {first.summary[h]["runs"].split()[0] for h in HOSTS}
        assert len(digests) == 1 and digests != {"n/a"}, first.summary
        assert {h: first.summary[h]["runs"] for h in HOSTS} == {h: "%s (deployed)" % min(digests) for h in HOSTS}
        assert {h: again.summary[h]["runs"] for h in HOSTS} == {h: "%s (unchanged)" % min(digests) for h in HOSTS}
        # Ready per the play, and still answering on each host itself.
        assert {h: fleet.health(h) for h in HOSTS} == {h: 200 for h in HOSTS}
    finally:
        fleet.down(HOSTS)
    running = fleet.lab("list").stdout
    assert not [h for h in HOSTS if '"name":"%s"' % h in running], running
