# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Start SGLang with its API key in memory only: never in a command line, never in what it prints.

SGLang 0.5.23 reads its API key only from ``--api-key`` (no environment variable), and a key on the command
line is readable by every local user (``/proc/PID/cmdline``, ``ps``). The unit passes the literal word
``${SGLANG_API_KEY}`` (systemd does not expand ``$${...}``) and the key as SGLANG_API_KEY from a root-only
EnvironmentFile. This launcher, run by SGLang's own interpreter, takes the key out of the environment,
puts it in place of the word in ``sys.argv`` and runs SGLang in this same process, the way ``python``
would run it:

    launch_sglang.py -m sglang.launch_server ARGS...    (like python -m)
    launch_sglang.py /opt/sglang/venv/bin/sglang serve ARGS...    (a script, like python SCRIPT)
    launch_sglang.py -c CODE ARGS...                     (like python -c)

SGLang logs its arguments with the key in clear (``server_args={... 'api_key': ...}``, and
``launch_command``): everything this process writes to stdout/stderr or logs has the key and the HF token
replaced by ********, in every form they are printed in: raw, and escaped in a ``repr()`` or JSON string (the
``server_args=`` dump is a dict repr, where a tab in a key reads ``\\t``; the roles refuse such keys anyway).
The processes SGLang spawns get neither variable; they receive the key inside the server args and print none
of it.
"""

import json
import logging
import os
import runpy
import sys

KEY_VAR = "SGLANG_API_KEY"
PLACEHOLDER = "${%s}" % KEY_VAR
# Secrets this process may print: the API key, and the HF token huggingface_hub reads from the environment.
TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
SECRET_FLAGS = ("--api-key", "--admin-api-key", "--ssl-keyfile-password")
MASK = "********"


def printed_forms(secret):
    """The secret raw and escaped inside a repr() or JSON string, once or twice over: a copy of
    plugins/module_utils/_redact.py's printed_forms (this file runs without the collection; a test keeps them equal)."""
    forms, last = set([secret]), set([secret])
    for _level in range(2):
        last = set(f for s in last for f in (repr(s)[1:-1], json.dumps(s)[1:-1], json.dumps(s, ensure_ascii=False)[1:-1]))
        forms.update(last)
    return forms


class MaskedStream(object):
    """A text stream that replaces the secrets in everything written to it."""

    def __init__(self, stream, secrets):
        self._stream = stream
        self._secrets = secrets

    def write(self, text):
        if isinstance(text, str):
            for secret in self._secrets:
                text = text.replace(secret, MASK)
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def mask_output(secrets):
    """Mask secrets in sys.stdout, sys.stderr and every log record of this process."""
    secrets = sorted(set(f for s in secrets if s for f in printed_forms(s)), key=len, reverse=True)
    if not secrets:
        return
    sys.stdout = MaskedStream(sys.stdout, secrets)
    sys.stderr = MaskedStream(sys.stderr, secrets)
    make_record = logging.getLogRecordFactory()

    def masked_record(*args, **kwargs):
        record = make_record(*args, **kwargs)
        message = record.getMessage()
        masked = message
        for secret in secrets:
            masked = masked.replace(secret, MASK)
        if masked != message:
            record.msg, record.args = masked, ()
        return record

    logging.setLogRecordFactory(masked_record)


def refuse(message):
    sys.stderr.write("launch_sglang.py: %s\n" % message)
    return 2


def main(argv):
    if not argv or (argv[0] in ("-m", "-c") and len(argv) < 2):
        return refuse("usage: launch_sglang.py -m MODULE ARGS... | -c CODE ARGS... | SCRIPT ARGS...")
    key = os.environ.pop(KEY_VAR, "")
    args = list(argv)
    for i, word in enumerate(args):
        name = word.split("=", 1)[0]
        if name in SECRET_FLAGS and (word.split("=", 1)[1:] or args[i + 1:i + 2]) != [PLACEHOLDER]:
            return refuse("%s on the command line is readable by every local user: give the value as %s in the unit's "
                          "EnvironmentFile and pass --api-key %s (sglang_server_api_key does this)"
                          % (name, KEY_VAR, PLACEHOLDER.replace("$", "$$")))
        if PLACEHOLDER in (word, word.split("=", 1)[-1]):
            if not key:
                return refuse("the command line refers to %s but the environment has no %s: set sglang_server_api_key "
                              "(the role writes it to the unit's EnvironmentFile)" % (PLACEHOLDER, KEY_VAR))
            args[i] = word.replace(PLACEHOLDER, key)
    mask_output([key] + [os.environ.get(name, "") for name in TOKEN_VARS])
    if args[0] == "-m":
        sys.argv = [args[1]] + args[2:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    elif args[0] == "-c":
        sys.argv = ["-c"] + args[2:]
        # python -c: the code runs as __main__ (what the lab's fault cases start)
        exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})  # pylint: disable=exec-used
    else:
        sys.argv = args
        runpy.run_path(args[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
