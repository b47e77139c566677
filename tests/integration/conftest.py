import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAB = ROOT / "tests" / "lab" / "bin" / "lab"


def lab(*args, check=True):
    return subprocess.run([str(LAB), *args], check=check, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def ansible_env():
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = str(ROOT / "collections")
    env["ANSIBLE_HOST_KEY_CHECKING"] = "false"
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_PIPELINING"] = "true"
    env["ANSIBLE_FORKS"] = "16"
    return env
