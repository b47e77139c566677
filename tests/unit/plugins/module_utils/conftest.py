"""Fixtures of the benchmark client and runner tests: the rate simulator and canned answers."""

import pytest

from bench_servers import CannedServers, rate_sim  # tests/unit/bench_servers.py


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    s = rate_sim(tmp_path_factory.mktemp("sim"))
    yield s
    s.stop()


@pytest.fixture
def canned():
    servers = CannedServers()
    yield servers.make
    servers.close()
