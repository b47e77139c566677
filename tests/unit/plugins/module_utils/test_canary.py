# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The accuracy canary: its answer key, its graders, and runs against the lab's SGLang simulator."""

import ast
import re
import importlib.util

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.bench import _client as bcl
from ansible_collections.llmops.sglang.plugins.module_utils import _canary as cn

from sim_harness import SIM, Sim, free_port  # tests/unit/sim_harness.py

# Real output of `python3 -m sglang.test.run_eval --eval-name gsm8k ... --num-shots 20 --num-threads 1319`
# (sgl-project/sglang PR #17041, 2026-01).
RUN_EVAL_GSM8K = """\
100%|███████████████████████████████████████████████████| 1319/1319 [05:56<00:00,  3.70it/s]
Total latency: 357.066 s
Score: 0.966
"""
# SGLang 0.5.23's run_eval with --repeat 3 (its print statements), and few_shot_gsm8k's.
RUN_EVAL_REPEAT = """\
====================
Repeat: 3, mean: 0.941
Scores: ['0.940', '0.945', '0.938']
Mean latency: 120.402 s
====================
Output throughput: 1834.220 token/s
{'score': 0.938, 'latency': 120.402}
"""
FEW_SHOT_GSM8K = "Accuracy: 0.952\nInvalid: 0.001\nLatency: 88.310 s\nOutput throughput: 2301.118 token/s\n"


def load_sim_module():
    spec = importlib.util.spec_from_file_location("sglang_sim_for_canary", SIM)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# The canary's simulator: a 64K context and a fast token rate keep long-context checks quick.
CANARY_SIM = ["--context-length", "65536", "--sim-tokens-per-second", "400", "--sim-ttft-ms", "20"]


@pytest.fixture(scope="module")
def sims(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("canary")
    normal = Sim(tmp, CANARY_SIM)
    degraded = Sim(tmp, CANARY_SIM + ["--sim-fault", "degrade_recall", "--sim-recall-depth", "0.6"])
    yield normal, degraded
    normal.stop()
    degraded.stop()


# ---------------------------------------------------------------------------------------------
# The answer key


@pytest.mark.parametrize("name,code,call,expected", cn.CODING_QUESTIONS, ids=[q[0] for q in cn.CODING_QUESTIONS])
def test_every_coding_answer_is_what_python_computes(name, code, call, expected):
    scope = {}
    exec(compile(code, name, "exec"), scope)  # noqa: S102 - the canary's own fixed snippets
    assert eval(call, scope) == ast.literal_eval(expected)  # noqa: S307
    # the prompt shows exactly this code and call
    prompt = cn.coding_prompt(code, call)[0]["content"]
    assert code in prompt and ("What does `%s` return?" % call) in prompt and "Answer with the value only" in prompt


def test_needle_prompt_is_found_by_a_needle_reader_at_its_depth():
    sim = load_sim_module()
    for ctx, depth in ((2048, 0.1), (8192, 0.5), (32768, 0.9), (4096, 0.0), (4096, 1.0)):
        messages, value, at = cn.needle_prompt(3, ctx, depth)
        text = messages[0]["content"]
        assert text.endswith(cn.NEEDLE_QUESTION) and text.count("needle") == 2  # the comment and the question
        assert 0.9 * ctx * 4 <= len(text) <= ctx * 4
        found = sim.NEEDLE_RE.search(text)
        assert found.group(1) == value
        assert ("# needle: %s\n" % value) in text
        assert abs(found.start() / float(len(text)) - at) < 0.001
        assert abs(at - depth) < 0.03
    assert cn.needle_value(0, 4096, 0.5) == cn.needle_value(0, 4096, 0.5) != cn.needle_value(0, 4096, 0.9)
    assert cn.needle_prompt(0, 4096, 0.5) == cn.needle_prompt(0, 4096, 0.5)


def test_build_items_skips_sizes_beyond_the_context_and_validates():
    items, warnings = cn.build_items(["needle", "coding"], 0, [2048, 65536], [0.25, 0.75], max_model_len=65536)
    assert [it["id"] for it in items if it["check"] == "needle"] == ["needle-2048-0.25", "needle-2048-0.75"]
    assert len([it for it in items if it["check"] == "coding"]) == len(cn.CODING_QUESTIONS)
    assert warnings == ["needle context 65536 tokens skipped: the server's context length is 65536"]
    with pytest.raises(cn.CanaryError, match="unknown check"):
        cn.build_items(["math"])
    with pytest.raises(cn.CanaryError, match="fractions between 0 and 1"):
        cn.build_items(["needle"], 0, [1024], [1.5])
    with pytest.raises(cn.CanaryError, match=">= 256"):
        cn.build_items(["needle"], 0, [100], [0.5])


# ---------------------------------------------------------------------------------------------
# Graders


@pytest.mark.parametrize("answer,ok", [
    ("K7QX-4M2D-9PLA", True), ("`K7QX-4M2D-9PLA`", True), ("\"K7QX-4M2D-9PLA\".", True), ("k7qx-4m2d-9pla", True),
    ("The needle is K7QX-4M2D-9PLA.", True), ("```\nK7QX-4M2D-9PLA\n```", True),
    ("L8RY-5N3E-0QMB", False), ("K7QX-4M2D", False), ("K7QX-4M2D-9PLAX", False), ("", False), ("I cannot find it.", False),
])
def test_needle_grader(answer, ok):
    assert cn.value_matches(answer, "K7QX-4M2D-9PLA") is ok


@pytest.mark.parametrize("answer,expected,ok", [
    ("13", "13", True), ("`13`", "13", True), ("13.", "13", True), ("The function returns 13.", "13", True),
    ("```python\n[25, 49, 64]\n```", "[25, 49, 64]", True), ("[25,49,64]", "[25, 49, 64]", True),
    ("'eht-tac-tas-tam'", "'eht-tac-tas-tam'", True), ("eht-tac-tas-tam", "'eht-tac-tas-tam'", True),
    ("(-4, 3)", "(-4, 3)", True), ("[('a', 12), ('b', 15), ('c', 6)]", "[('a', 12), ('b', 15), ('c', 6)]", True),
    ("14", "13", False), ("13.0", "13", False), ("[-4, 3]", "(-4, 3)", False), ("(-3, -2)", "(-4, 3)", False),
    ("[25, 49]", "[25, 49, 64]", False), ("'tam-tas-tac-eht'", "'eht-tac-tas-tam'", False),
    ("This is a deterministic answer from the SGLang simulator.", "'eht-tac-tas-tam'", False),
    ("This is a deterministic answer from the SGLang simulator.", "13", False),
])
def test_coding_grader(answer, expected, ok):
    assert cn.literal_matches(answer, expected) is ok


def _fenced_by_regex(text):
    """The fence reading as a regex: the reference _strip_answer must agree with (the regex is quadratic on an
    unclosed fence, so it is only run on short texts here)."""
    text = (text or "").strip()
    fence = re.findall(r"```[a-zA-Z0-9_+-]*\n?(.*?)```", text, re.S)
    return fence[-1].strip() if fence else text


def test_fence_reading_agrees_with_the_regex_on_every_short_mix():
    pieces = ["```", "`", "``", "python", "\n", "610", " ", "[1, 2]", "x-y"]
    texts = [""] + ["".join(pieces[(i >> (3 * k)) % len(pieces)] for k in range(5)) for i in range(len(pieces) ** 4)]
    assert [cn._strip_answer(t) for t in texts] == [_fenced_by_regex(t) for t in texts]


def test_an_unclosed_fence_of_the_graded_size_is_read_as_plain_text():
    answer = "```" + "a" * (cn.MAX_GRADED_CHARS - 3)
    assert cn._strip_answer(answer) == answer
    assert cn.grade({"check": "coding", "expected": "13"}, answer) is False
    assert cn.grade({"check": "coding", "expected": "13"}, answer + "```13```") is False  # past the graded size
    assert cn.grade({"check": "coding", "expected": "13"}, "```13``` then ```python\n13\n```") is True


# ---------------------------------------------------------------------------------------------
# Drift


def test_drift_against_the_last_good_state():
    first = cn.compare(None, {"a": "1", "b": "2"})
    assert first["compared"] is False and first["drift"] is False and len(first["hash"]) == 64
    prev = {"hash": first["hash"], "answers": {"a": "1", "b": "2", "c": "3"}}
    same = cn.compare({"hash": first["hash"], "answers": {"a": "1", "b": "2"}}, {"b": "2", "a": "1"})
    assert same["compared"] and not same["drift"] and same["hash"] == first["hash"] == same["previous_hash"]
    moved = cn.compare(prev, {"a": "1", "b": "two", "d": "4"})
    assert moved["drift"] and moved["changed"] == ["b"] and moved["added"] == ["d"] and moved["removed"] == ["c"]
    assert cn.compare({"answers": "junk"}, {"a": "1"})["compared"] is False


# ---------------------------------------------------------------------------------------------
# run_eval output


def test_parse_run_eval_real_and_repeat_and_few_shot_outputs():
    assert cn.parse_run_eval(RUN_EVAL_GSM8K) == {"score": 0.966, "repeat": None, "latency_s": 357.066, "output_tok_s": None}
    rep = cn.parse_run_eval(RUN_EVAL_REPEAT)
    assert rep["score"] == 0.941 and rep["repeat"] == 3 and rep["latency_s"] == 120.402 and rep["output_tok_s"] == 1834.22
    assert cn.parse_run_eval(FEW_SHOT_GSM8K)["score"] == 0.952
    assert cn.parse_run_eval("Traceback (most recent call last):\nModuleNotFoundError: No module named 'sglang'")["score"] is None


def test_run_eval_argv():
    argv = cn.run_eval_argv("/opt/sglang/venv/bin/python", "http://127.0.0.1:30000", "gsm8k", 200, 64, "qwen", ["--max-tokens", "4096"])
    assert argv[:3] == ["/opt/sglang/venv/bin/python", "-m", "sglang.test.run_eval"]
    assert " ".join(argv[3:]) == ("--base-url http://127.0.0.1:30000 --eval-name gsm8k --num-examples 200 --num-threads 64 "
                                  "--model qwen --max-tokens 4096")


# ---------------------------------------------------------------------------------------------
# Against the simulator


def run_canary(url, checks, contexts=(2048, 8192), depths=(0.1, 0.5, 0.9)):
    client = bcl.Client(url, timeout=60)
    model, max_len, _spec, err = bcl.discover(client)
    assert err is None
    items, _w = cn.build_items(checks, 0, list(contexts), list(depths), max_model_len=max_len)
    cn.ask_all(client, items, model, parallel=3)
    return items


def test_canary_passes_against_a_healthy_server(sims):
    items = run_canary(sims[0].url, ["needle", "coding"])
    needle = cn.score_check(items, "needle", 1.0)
    assert needle["passed"] and needle["correct"] == needle["total"] == 6 and needle["errors"] == {}
    assert all(it["prompt_tokens"] and it["answer"].startswith("The needle is ") for it in needle["items"])
    # the simulator answers every other question with a fixed text: the coding grader must not accept it
    coding = cn.score_check(items, "coding", 1.0)
    assert coding["total"] == len(cn.CODING_QUESTIONS) and coding["correct"] == 0 and not coding["passed"]
    # deterministic: a second run gives the same answers, so no drift
    again = run_canary(sims[0].url, ["needle"])
    state = cn.state_of(cn.answers_of([it for it in items if it["check"] == "needle"]), items, "qwen3.5-397b")
    assert cn.compare(state, cn.answers_of(again))["drift"] is False


def test_canary_fails_when_recall_degrades_with_depth(sims):
    items = run_canary(sims[1].url, ["needle"], depths=(0.1, 0.5, 0.9))
    needle = cn.score_check(items, "needle", 1.0)
    assert not needle["passed"] and needle["correct"] == 4 and needle["total"] == 6
    wrong = sorted(it["id"] for it in needle["items"] if not it["correct"])
    assert wrong == ["needle-2048-0.90", "needle-8192-0.90"]  # exactly the needles deeper than the simulator's 0.6
    for it in needle["items"]:
        if not it["correct"]:
            assert it["error"] is None and it["expected"] not in it["answer"]
    # and the answers drifted from the healthy server's
    healthy = cn.answers_of(run_canary(sims[0].url, ["needle"]))
    drift = cn.compare({"answers": healthy}, cn.answers_of(items))
    assert drift["drift"] and drift["changed"] == wrong


def test_canary_with_the_server_down_reports_errors():
    client = bcl.Client("http://127.0.0.1:%d" % free_port(), timeout=5)
    items, _w = cn.build_items(["coding"])
    cn.ask_all(client, items, "m", parallel=2)
    res = cn.score_check(items, "coding", 1.0)
    assert not res["passed"] and res["errors"] == {"refused": len(cn.CODING_QUESTIONS)}
    assert cn.answers_of(items) == dict((it["id"], None) for it in items)
    failure = cn.request_failure(items)
    assert failure["kind"] == "refused" and failure["count"] == failure["total"] == len(cn.CODING_QUESTIONS)
    assert failure["message"].startswith("the chat endpoint did not answer 8 of 8 questions (refused: connection refused at")


def test_an_answer_only_in_reasoning_is_a_wrong_answer_not_a_request_failure():
    items = [{"id": "a", "check": "coding", "error": {"kind": "no_content", "message": "thinking only"}},
             {"id": "b", "check": "coding", "error": None}]
    assert cn.request_failure(items) is None
    items.append({"id": "c", "check": "coding", "error": {"kind": "not_found", "message": "HTTP 404 from x"}})
    assert cn.request_failure(items)["message"] == "the chat endpoint did not answer 1 of 3 questions (not_found: HTTP 404 from x)"
