import pathlib
import sys

import pytest

# The lab helpers (booting named hosts, wheelhouses, recaps) are shared with tests/bench.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "lab"))
import fleet  # noqa: E402  pylint: disable=wrong-import-position
from fleet import ROOT, lab  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import


@pytest.fixture(scope="session")
def ansible_env():
    """The repository's controller settings: forks 16, pipelining on."""
    return fleet.ansible_env(16, True)
