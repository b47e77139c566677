# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_redact: the one redaction module, on what SGLang 0.5.23 itself prints and answers, and on every report path.

Inputs are in tests/fixtures/secrets (see its MANIFEST): SGLang 0.5.23's own launch_command, ``server_args=``
line and /server_info fields for a launch with secrets, a journal made of SGLang's lines, and real-shaped lines
from the other places a secret shows up. Which flags argparse accepts abbreviated is read from SGLang's and
sglang-router's own parsers.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.llmops.sglang.plugins.module_utils import _http, _kv_guard, _readiness, _server_info, _sglang_args, _unit_processes
from ansible_collections.llmops.sglang.plugins.module_utils._redact import (
    MASK, is_secret_flag, is_secret_name, printed_forms, redact, redact_argv, redact_text)

ROOT = pathlib.Path(__file__).resolve().parents[4]
SECRETS_DIR = ROOT / "tests" / "fixtures" / "secrets"
LAUNCH = json.loads((SECRETS_DIR / "sglang-0.5.23-secrets.json").read_text())
SAMPLES = json.loads((SECRETS_DIR / "text-samples.json").read_text())
KEYS = LAUNCH["secrets"]
SGLANG_SECRET_FIELDS = {"api_key", "admin_api_key", "ssl_keyfile_password"}


def leaked(text):
    return [name for name, value in KEYS.items() if value in text]


# --- SGLang 0.5.23's own output ------------------------------------------------------------------


def test_server_info_from_sglang_keeps_every_field_but_the_secrets():
    info = LAUNCH["server_info"]
    out = redact(info)
    assert leaked(json.dumps(out)) == []
    assert {k for k in info if out[k] != info[k]} == SGLANG_SECRET_FIELDS | {"launch_command"}
    assert all(out[k] == MASK for k in SGLANG_SECRET_FIELDS)
    # the command line as typed keeps its flags (abbreviated, inline) and the paths
    assert out["launch_command"] == (
        "--model-path /models/Qwen3.5-397B-A17B-NVFP4 --tp-size 8 --kv-cache-dtype bf16 --host 0.0.0.0 --port 30000 "
        "--api-k %s --admin-api=%s --ssl-keyfile /etc/ssl/private/sglang.key --ssl-keyfile-password %s "
        "--ssl-certfile /etc/ssl/certs/sglang.pem" % (MASK, MASK, MASK))
    assert redact(out) is out  # nothing left to mask: the same object comes back


def test_server_args_log_line_stays_a_dict_without_the_secrets():
    line = LAUNCH["dump_line"]
    assert len(leaked(line)) == 3
    out = redact_text(line)
    assert leaked(out) == []
    before = ast.literal_eval(line.split("server_args=", 1)[1])
    after = ast.literal_eval(out.split("server_args=", 1)[1])
    assert {k for k in before if before[k] != after[k]} == SGLANG_SECRET_FIELDS
    assert after["ssl_keyfile"] == "/etc/ssl/private/sglang.key" and after["admin_api_key"] == MASK


def test_argv_masks_exactly_the_secret_values():
    argv = LAUNCH["argv"]
    out = redact_argv(argv)
    changed = [i for i, (a, b) in enumerate(zip(argv, out)) if a != b]
    assert [argv[i].split("=")[0] for i in changed] == [KEYS["api_key"], "--admin-api", KEYS["ssl_keyfile_password"]]
    assert out[argv.index("--api-k") + 1] == MASK and "--admin-api=" + MASK in out
    assert leaked(" ".join(out)) == []


@pytest.mark.parametrize("sample", SAMPLES, ids=[s["what"][:40] for s in SAMPLES])
def test_real_shaped_lines(sample):
    out = redact_text(sample["text"])
    assert [s for s in sample["secrets"] if s in out] == []
    assert [k for k in sample["kept"] if k not in out] == []
    if not sample["secrets"]:
        assert out == sample["text"]


@pytest.mark.parametrize("text,secret", [
    ("A: api_key='00000000000A' ", "00000000000A"),          # found by the property test below
    ("note: api_key=\"k-123456\" rest", "k-123456"),
    ("Environment=HF_TOKEN=abcdef123456", "abcdef123456"),
    ("x=y=z: password='p4ss-w0rd'", "p4ss-w0rd"),
])
def test_a_secret_assignment_inside_another_value_is_masked(text, secret):
    out = redact_text(text)
    assert secret not in out and MASK in out


def test_a_secret_found_once_is_hidden_everywhere():
    line = LAUNCH["dump_line"] + "\nERROR: 401 for key %s" % KEYS["api_key"]
    assert leaked(redact_text(line)) == []
    data = {"server_info": {"api_key": KEYS["api_key"]}, "note": ["the key was %s" % KEYS["api_key"]]}
    assert leaked(json.dumps(redact(data))) == []


# Keys with a tab, a no-break space, a zero-width space: what SGLang 0.5.23 printed of them (make_samples.py).
ESCAPED = json.loads((SECRETS_DIR / "sglang-0.5.23-escaped-keys.json").read_text())["keys"]


def printed(key):
    """The key raw, in a repr() and in a JSON string: the forms SGLang prints (its dump is a dict repr)."""
    return {key, repr(key)[1:-1], json.dumps(key)[1:-1], json.dumps(key, ensure_ascii=False)[1:-1]}


@pytest.mark.parametrize("what", sorted(ESCAPED))
def test_a_key_sglang_prints_escaped_is_masked_in_every_form(what):
    sample = ESCAPED[what]
    key, dump = sample["key"], sample["dump_line"]
    # SGLang's dump holds the key escaped, never raw: masking the raw value alone leaves it readable
    assert key not in dump and repr(key)[1:-1] in dump.replace(key, MASK)
    for text in (dump, sample["server_info_json"], sample["launch_command"]):
        for out in (redact_text(text), redact_text(text, [key])):
            assert [f for f in printed(key) if f in out] == [], (what, out[:200])
    # a key known raw (a dict value) is hidden where it was printed escaped, and a key given by the caller too
    note = "auth failed for %s; was %s" % (repr(key)[1:-1], json.dumps(key)[1:-1])
    assert [f for f in printed(key) if f in json.dumps(redact({"api_key": key, "log": note}), ensure_ascii=False)] == []
    assert [f for f in printed(key) if f in redact_text(note, [key])] == []
    assert printed(key) <= printed_forms(key)


def test_the_launcher_masks_the_same_forms():
    import runpy  # pylint: disable=import-outside-toplevel

    launcher = runpy.run_path(str(ROOT / "roles" / "sglang_server" / "files" / "launch_sglang.py"))
    for key in [s["key"] for s in ESCAPED.values()] + [KEYS["api_key"], "a'b\"c\\d"]:
        assert launcher["printed_forms"](key) == printed_forms(key)


def test_values_that_are_not_credentials_stay():
    text = "server_args=ServerArgs(api_key=None, admin_api_key='', ssl_keyfile_password=None, max_total_tokens=8192)"
    assert redact_text(text) == text
    assert redact({"api_key": None, "hf_token": "", "port": 30000}) == {"api_key": None, "hf_token": "", "port": 30000}


@pytest.mark.parametrize("name, secret", [
    ("api_key", True), ("admin_api_key", True), ("ssl_keyfile_password", True), ("HF_TOKEN", True),
    ("HUGGING_FACE_HUB_TOKEN", True), ("SGLANG_API_KEY", True), ("sglang_server_api_key", True),
    ("control_plane_api_keys", True), ("token", True), ("Authorization", False),
    ("ssl_keyfile", False), ("max_total_tokens", False), ("speculative_token_map", False), ("eos_token", False),
    ("#new-token", False), ("tls_key_path", False), ("tokenizer_path", False), ("kv_cache_dtype", False),
])
def test_secret_names(name, secret):
    assert is_secret_name(name) is secret


# --- abbreviated flags, from the parsers themselves ------------------------------------------------

RESOLVE = r"""
import argparse, json, sys
def resolutions(parser):
    parser.error = lambda message: (_ for _ in ()).throw(ValueError(message))
    options = sorted(o for a in parser._actions for o in a.option_strings if o.startswith("--"))
    dests = dict((o, a.dest) for a in parser._actions for o in a.option_strings)
    out = {}
    for option in options:
        for end in range(3, len(option) + 1):  # from one letter after the dashes
            prefix = option[:end]
            if prefix in out:
                continue
            try:
                found = parser._parse_optional(prefix)
            except ValueError:
                out[prefix] = "<ambiguous>"
                continue
            if isinstance(found, list):  # Python 3.12+
                found = found[0] if len(found) == 1 else None
            out[prefix] = found[0].dest if found and found[0] is not None else None
    return {"resolved": out, "dests": dests}
"""

SGLANG_SCRIPT = RESOLVE + r"""
import ast, os
import sglang
from sglang.srt.server_args import ServerArgs
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
result = resolutions(parser)
# the fields SGLang itself redacts from its logs (importing the module pulls in torchvision: read it instead)
path = os.path.join(os.path.dirname(sglang.__file__), "srt", "sampling", "watermarking", "core.py")
for node in ast.parse(open(path).read()).body:
    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "WATERMARK_SECRET_FIELD_NAMES":
        result["watermark_secrets"] = sorted(ast.literal_eval(node.value.args[0]))
json.dump(result, sys.stdout)
"""


@pytest.fixture(scope="module")
def sglang_parser(sglang_python):
    proc = subprocess.run([sglang_python, "-c", SGLANG_SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return json.loads(proc.stdout)


def check_parser(found, secret_dests):
    resolved, dests = found["resolved"], found["dests"]
    # every spelling argparse takes for a secret flag is masked
    missed = sorted(p for p, dest in resolved.items() if dest in secret_dests and not is_secret_flag(p))
    assert missed == []
    # no real flag of another option is taken for a secret one
    wrong = sorted(o for o, dest in dests.items() if o.startswith("--") and dest not in secret_dests and is_secret_flag(o))
    assert wrong == []
    # the names of SGLang's secret fields are secret names, and no other field's name is
    assert {d for d in dests.values() if is_secret_name(d)} == set(secret_dests)


def test_sglang_0_5_23_secret_flags_and_their_abbreviations(sglang_parser):
    watermark = set(sglang_parser["watermark_secrets"])
    assert "watermark_key" in watermark
    check_parser(sglang_parser, SGLANG_SECRET_FIELDS | (watermark & set(sglang_parser["dests"].values())))
    # every field of SGLang's own /server_info that holds a secret, and no other
    assert {k for k in LAUNCH["server_info"] if is_secret_name(k)} == SGLANG_SECRET_FIELDS | watermark
    # argparse really takes these for the secret flags
    assert sglang_parser["resolved"]["--api-k"] == "api_key" and sglang_parser["resolved"]["--admin-api"] == "admin_api_key"
    assert sglang_parser["resolved"]["--ssl-keyfile-p"] == "ssl_keyfile_password"


def test_sglang_router_0_3_2_secret_flags_and_their_abbreviations():
    pytest.importorskip("sglang_router")
    from sglang_router.router_args import RouterArgs  # pylint: disable=import-outside-toplevel

    namespace = {}
    exec(compile(RESOLVE, "resolve", "exec"), namespace)  # pylint: disable=exec-used
    import argparse  # pylint: disable=import-outside-toplevel

    parser = argparse.ArgumentParser()
    RouterArgs.add_cli_args(parser, use_router_prefix=False)
    found = namespace["resolutions"](parser)
    check_parser(found, {"api_key", "control_plane_api_keys", "oracle_password"})


# --- the four maskers and the report paths use it ------------------------------------------------


def test_every_masker_delegates(tmp_path):
    line = "--api-k %s -H 'Authorization: Bearer %s'" % (KEYS["api_key"], KEYS["admin_api_key"])
    assert leaked(_readiness.mask_text(line)) == []
    # a unit's process as the stop report shows it
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "stat").write_text("4242 (python3) S 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0\n")
    (tmp_path / "4242" / "cmdline").write_bytes(b"sglang\0--admin-api\0" + KEYS["admin_api_key"].encode() + b"\0")
    shown = _unit_processes.process_info(4242, str(tmp_path))
    assert shown["cmdline"].startswith("sglang --admin-api ") and leaked(shown["cmdline"]) == []
    assert leaked(" ".join(_kv_guard.redact_argv(["sglang", "--api-k", KEYS["api_key"]]))) == []
    assert leaked(json.dumps(_server_info.clean({"launch_command": line}))) == []
    assert _server_info.clean({"hf_token": KEYS["hf_token"]}) == {"hf_token": MASK}
    assert _sglang_args.is_secret_flag("--api-k") and not _sglang_args.is_secret_flag("--ssl-keyfile")
    assert leaked(json.dumps(_sglang_args.mask({"problem": line}, []))) == []
    assert _sglang_args.MASK == _kv_guard.REDACTED == _readiness.MASK == MASK
    # an HTTP error body quoting the request's header, even when the module was given no key
    assert leaked(_http.snippet(b'{"error": "Unauthorized", "echo": "Authorization: Bearer %s"}' % KEYS["api_key"].encode())) == []


class _Sglang(BaseHTTPRequestHandler):
    """/server_info as SGLang 0.5.23 built it for the fixture launch, and a metrics body with a malformed line."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        status, body, ctype = 404, b'{"error": "not found"}', "application/json"
        if self.path == "/server_info":
            status, body = 200, json.dumps(LAUNCH["server_info"]).encode()
        elif self.path == "/metrics":
            status, ctype = 200, "text/plain"
            body = [s for s in SAMPLES if s["what"].startswith("a metrics body")][0]["text"].encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_server_info_report_hides_secrets_in_the_answer_and_the_metrics_examples():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sglang)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        result = _server_info.gather("http://127.0.0.1:%d" % server.server_address[1], endpoints=["server_info", "metrics"],
                                     use_proxy=False)
    finally:
        server.shutdown()
        server.server_close()
    text = json.dumps(result)
    assert leaked(text) == []
    assert result["server_info"]["api_key"] == MASK and "--api-k %s" % MASK in result["server_info"]["launch_command"]
    assert result["metrics_stats"]["malformed_lines"] == 1
    assert result["metrics_stats"]["malformed_examples"] == ['proxy-debug authorization="Bearer %s" x' % MASK]


def test_log_audit_evidence_and_fatal_message_are_redacted(tmp_path):
    log = SECRETS_DIR / "journal-with-secrets.log"
    assert len(leaked(log.read_text())) == 4  # the dump's three, the key in a query and the HF token argparse echoes
    args = {"path": str(log)}
    argsfile = tmp_path / "args.json"
    argsfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "collections"))
    proc = subprocess.run([sys.executable, str(ROOT / "plugins" / "modules" / "log_audit.py"), str(argsfile)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300, check=False)
    result = json.loads(proc.stdout)
    assert leaked(proc.stdout.decode()) == []
    by_rule = {f["rule"]: f for f in result["findings"]}
    masked = "sglang serve: error: unrecognized arguments: --hf-token %s" % MASK
    assert [e["text"] for e in by_rule["cli_argument_error"]["evidence"]] == [masked]
    assert result["facts"]["fatal"]["class"] == "cli_argument_error" and result["facts"]["fatal"]["message"] == masked


# --- properties -----------------------------------------------------------------------------------

SECRET = st.text(st.sampled_from("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ0123456789-_.~+/"), min_size=12, max_size=48).filter(
    lambda s: not s.isdigit() and not s.startswith("-"))
CONTEXTS = [
    "--api-key {s}", "--api-key={s}", "--api-k {s}", "--admin-api={s}", "--ssl-keyfile-password '{s}'",
    "api_key='{s}'", '"api_key": "{s}"', "'admin_api_key': '{s}'", "SGLANG_API_KEY={s}", "HF_TOKEN='{s}'",
    "Authorization: Bearer {s}", "GET /v1/models?api_key={s}&x=1", "['--api-key', '{s}']", '["--api-key", "{s}"]',
]
NOISE = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret=SECRET, context=st.sampled_from(CONTEXTS), before=NOISE, after=NOISE)
def test_a_secret_in_any_known_place_never_survives(secret, context, before, after):
    text = before + " " + context.format(s=secret) + " " + after
    assert secret not in redact_text(text)
    assert secret not in json.dumps(redact({"log": [text]}))


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                       max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(value=JSONISH)
def test_any_value_is_accepted_and_redacting_twice_changes_nothing(value):
    once = redact(value)
    assert redact(once) == once
    text = json.dumps(value, default=str)
    assert redact_text(redact_text(text)) == redact_text(text)
