# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How a fuzz target runs: a seeded, shrink-free hypothesis loop that counts its cases, the check that an exception is
one of the target's documented errors with a message, and a module's main() run the way Ansible runs it, in a sandbox
where no program runs, no connection leaves the process and no wait really waits."""

import contextlib
import io
import json
import os
import random
import socket
import subprocess
import time
import zlib

from ansible.module_utils.common import warnings as ansible_warnings
from ansible.module_utils.testing import patch_module_args
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from .corpus import Mutator

# LLMOPS_FUZZ_SCALE=10 runs ten times the cases (a longer local run); CI runs 1 (its ansible-core 2.18 lane 0.25).
SCALE = float(os.environ.get("LLMOPS_FUZZ_SCALE", "1"))


# Cases per hypothesis example: hypothesis costs about a millisecond per example, a parser far less per case.
BATCH = 10


def fuzz(request, build, check, cases):
    """Run check(build(mutator)) on `cases` cases; the count goes into the report (tests/unit/conftest.py prints it).

    Hypothesis draws one integer per BATCH cases, seeded by the test's name, so every run draws the same cases; build
    turns the random stream into cases through a Mutator. No shrinking: a failure is reported at once, with its case.
    """
    count = [0]

    @seed(zlib.crc32(request.node.name.encode("utf-8")))
    @settings(max_examples=max(1, int(cases * SCALE) // BATCH), database=None, deadline=None, derandomize=False,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck), print_blob=False,
              report_multiple_bugs=False)
    @given(st.integers(0, 2 ** 64 - 1))
    def target(case_seed):
        mutator = Mutator(random.Random(case_seed))
        for index in range(BATCH):
            case = build(mutator)
            count[0] += 1
            try:
                check(case)
            except BaseException as exc:
                text = repr(case)
                exc.add_note("fuzz case %d of seed %d: %s" % (index, case_seed, text if len(text) < 3000 else text[:3000] + "..."))
                raise

    try:
        target()
    finally:
        request.node.user_properties.append(("fuzz_cases", count[0]))


def clean(call, *allowed):
    """call(), where the only exceptions allowed are the documented ones, each with a message."""
    try:
        return call()
    except allowed as exc:
        assert str(exc).strip(), "%s raised without a message" % type(exc).__name__
        return None


# ---- modules ---------------------------------------------------------------------------------------


class FuzzStop(BaseException):
    """time.sleep in the sandbox: the module got past its arguments into a wait loop; the case ends there."""


class _Captured(Exception):
    pass


def argument_spec(module):
    """The keyword arguments a module's main() gives AnsibleModule (argument_spec, mutually_exclusive, ...)."""
    captured = {}

    class Capture(object):
        def __init__(self, *args, **kwargs):
            captured.update(kwargs)
            raise _Captured()

    real = module.AnsibleModule
    module.AnsibleModule = Capture
    try:
        module.main()
    except _Captured:
        pass
    finally:
        module.AnsibleModule = real
    assert captured.get("argument_spec"), "%s.main() built no AnsibleModule" % module.__name__
    return captured


def run_main(module, args):
    """main() with args, as Ansible runs it: the JSON it printed (None when it reached a wait loop).

    A traceback fails the case; so does a main() that returns without exit_json or fail_json, output that is not
    JSON, or a failure without a message. (A failed command run by AnsibleModule.run_command carries its OS error as
    Ansible's "exception" field: that is Ansible's way of reporting it, not a crash of the module.)
    """
    ansible_warnings._global_warnings.clear()  # pylint: disable=protected-access
    ansible_warnings._global_deprecations.clear()  # pylint: disable=protected-access
    out = io.StringIO()
    with patch_module_args(args), contextlib.redirect_stdout(out):
        try:
            module.main()
        except SystemExit:
            pass
        except FuzzStop:
            return None
        else:
            raise AssertionError("%s.main() returned without exit_json or fail_json" % module.__name__)
    result = json.loads(out.getvalue())
    if result.get("failed"):
        assert isinstance(result.get("msg"), str) and result["msg"].strip(), result
    return result


def _refuse(*_args, **_kwargs):
    raise ConnectionRefusedError(111, "Connection refused (fuzz sandbox)")


def _no_program(*_args, **_kwargs):
    raise FileNotFoundError(2, "No such file or directory (fuzz sandbox: no program runs)")


def _stop(*_args, **_kwargs):
    raise FuzzStop()


def sandbox(monkeypatch):
    """No program runs (every spawn is 'not found'), no connection leaves (refused; names do not resolve), no sleep."""
    real_getaddrinfo = socket.getaddrinfo

    def numeric_only(host, port, *args, **kwargs):
        try:
            return real_getaddrinfo(host, port, 0, 0, 0, socket.AI_NUMERICHOST | socket.AI_NUMERICSERV)
        except (socket.gaierror, UnicodeError, TypeError, ValueError):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known (fuzz sandbox)")

    monkeypatch.setattr(socket.socket, "connect", _refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", _refuse)
    monkeypatch.setattr(socket, "getaddrinfo", numeric_only)
    monkeypatch.setattr(subprocess, "Popen", _no_program)
    for name in ("system", "execv", "execve", "execvp", "execvpe", "spawnv", "spawnve", "posix_spawn", "posix_spawnp", "fork",
                 "forkpty"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, _no_program)
    monkeypatch.setattr(time, "sleep", _stop)
