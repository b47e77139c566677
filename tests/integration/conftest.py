import pytest

# The lab helpers (tests/lab/fleet.py: booting named hosts, wheelhouses, recaps), shared with tests/bench, are on the
# import path through pytest.ini.
import fleet


@pytest.fixture(scope="session")
def ansible_env():
    """The repository's controller settings: forks 16, pipelining on."""
    return fleet.ansible_env(16, True)
