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
