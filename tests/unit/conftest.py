"""Test set-up shared by every unit test: the fixtures folder (every test input lives in ``tests/fixtures``), the
real SGLang's interpreter, loopback HTTP servers and the router fleet.

pytest.ini puts the collection (``ansible_collections.llmops.sglang``, through the link in collections/) and the
helpers of this folder (sim_harness, bench_servers, ...) on the import path.
"""

import contextlib
import json
import pathlib
import sys
import types
from unittest import mock

import pytest

import sglang_source
from sim_harness import LocalServer, RouterFleet

try:
    # ansible-core 2.19 and newer
    import ansible.module_utils.testing  # noqa: F401  pylint: disable=unused-import
except ImportError:
    # The oldest supported ansible-core (2.18, `make units-oldest`) has no ansible.module_utils.testing; its
    # patch_module_args is what 2.18's own unit tests did: the module's arguments as basic._ANSIBLE_ARGS.
    from ansible.module_utils import basic as _basic

    @contextlib.contextmanager
    def _patch_module_args(args=None):
        with mock.patch.object(_basic, "_ANSIBLE_ARGS", json.dumps({"ANSIBLE_MODULE_ARGS": args or {}}).encode()):
            yield

    sys.modules["ansible.module_utils.testing"] = types.ModuleType("ansible.module_utils.testing")
    sys.modules["ansible.module_utils.testing"].patch_module_args = _patch_module_args

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture(scope="session")
def sglang_python():
    """The interpreter of the real SGLang 0.5.23 (the oracle): its absence fails the test, naming the fix."""
    return sglang_source.python()


@pytest.fixture(scope="session")
def fixtures_dir():
    return FIXTURES


@pytest.fixture
def serve_http():
    """serve_http(handler, tls=None): an in-process HTTP server on a free loopback port answering with ``handler`` (a
    BaseHTTPRequestHandler class), HTTPS with ``tls`` (a server ssl.SSLContext), closed after the test."""
    servers = []

    def serve(handler, tls=None):
        servers.append(LocalServer(handler, tls))
        return servers[-1]
    yield serve
    for server in servers:
        server.close()


@pytest.fixture(scope="module")
def router_fleet(tmp_path_factory):
    """router_fleet(key, ...): SGLang's real router(s) in front of two simulated servers (sim_harness.RouterFleet),
    stopped after the test module."""
    fleets = []

    def start(key, **kwargs):
        fleets.append(RouterFleet(tmp_path_factory.mktemp("fleet"), key, **kwargs))
        return fleets[-1]
    yield start
    for fleet in fleets:
        fleet.stop()


@pytest.fixture(autouse=True)
def _fresh_module_warnings():
    """A module process starts with no warnings; tests run many modules in one process."""
    from ansible.module_utils.common import warnings

    warnings._global_warnings.clear()  # pylint: disable=protected-access
    warnings._global_deprecations.clear()  # pylint: disable=protected-access
    yield


# The fuzz suite (tests/unit/fuzz) reports its case count per target; collected here so that a run under
# pytest-xdist (whose workers send reports to this process) prints them too.
_FUZZ_CASES = {}


def pytest_runtest_logreport(report):
    if report.when != "call":
        return
    for key, value in getattr(report, "user_properties", ()):
        if key == "fuzz_cases":
            outcome = "xfail" if hasattr(report, "wasxfail") else report.outcome
            _FUZZ_CASES[report.nodeid.split("::")[-1]] = (value, report.duration, outcome)


def pytest_terminal_summary(terminalreporter):
    if not _FUZZ_CASES:
        return
    terminalreporter.write_sep("-", "fuzz cases per target")
    for name, (cases, seconds, outcome) in sorted(_FUZZ_CASES.items()):
        terminalreporter.write_line("%-60s %7d cases %6.1f s  %s" % (name, cases, seconds, outcome))
    total = sum(c for c, _s, _o in _FUZZ_CASES.values())
    seconds = sum(s for _c, s, _o in _FUZZ_CASES.values())
    terminalreporter.write_line("%-60s %7d cases %6.1f s" % ("total (%d targets)" % len(_FUZZ_CASES), total, seconds))
