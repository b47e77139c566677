"""Test set-up shared by every unit test.

Makes ``ansible_collections.llmops.sglang`` importable from a clone (collections/ holds a link to
the tree) and locates the shared reference fixtures (``../shared`` next to the clone, or
``$LLMOPS_SHARED``).
"""

import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
_COLLECTIONS = ROOT / "collections"
if (_COLLECTIONS / "ansible_collections" / "llmops" / "sglang").exists():
    sys.path.insert(0, str(_COLLECTIONS))

FIXTURES = ROOT / "tests" / "fixtures"


def _shared_dir():
    return pathlib.Path(os.environ.get("LLMOPS_SHARED", ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def shared_dir():
    """The shared reference material; a missing copy is an error, never a skip."""
    path = _shared_dir()
    if not (path / "fixtures").is_dir():
        pytest.fail(f"shared fixtures not found at {path}: set LLMOPS_SHARED to the shared/ directory")
    return path


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
