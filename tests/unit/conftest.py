"""Test set-up shared by every unit test.

Makes ``ansible_collections.llmops.sglang`` importable from a clone (collections/ holds a link to
the tree) and names the fixtures folder: every test input lives in ``tests/fixtures``.
"""

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
_COLLECTIONS = ROOT / "collections"
if (_COLLECTIONS / "ansible_collections" / "llmops" / "sglang").exists():
    sys.path.insert(0, str(_COLLECTIONS))

FIXTURES = ROOT / "tests" / "fixtures"
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import sglang_source  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture(scope="session")
def sglang_python():
    """The interpreter of the real SGLang 0.5.23 (the oracle): its absence fails the test, naming the fix."""
    return sglang_source.python()


@pytest.fixture(scope="session")
def fixtures_dir():
    return FIXTURES


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
