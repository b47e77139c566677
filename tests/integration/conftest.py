import os
import pathlib
import sys

import pytest

# The lab helpers (booting named hosts, wheelhouses, recaps) are shared with tests/bench.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "lab"))
from fleet import ROOT, lab  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import


@pytest.fixture(scope="session")
def ansible_env():
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = str(ROOT / "collections")
    env["ANSIBLE_HOST_KEY_CHECKING"] = "false"
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_PIPELINING"] = "true"
    env["ANSIBLE_FORKS"] = "16"
    return env
