#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: accuracy_canary
short_description: Check that an SGLang deployment still answers correctly, and whether its answers drifted
version_added: 0.1.0
description:
  - Asks the server deterministic questions (temperature 0, fixed seed, thinking off) whose answers the module checks
    itself, with the Python standard library only.
  - >-
    C(needle) puts a C(# needle: VALUE) comment at several depths (O(needle_depths)) of a synthetic Python repository of
    several sizes (O(needle_contexts), in tokens approximated as characters divided by O(chars_per_token)) and asks
    "What is the value of the needle? Answer with the value only.". Long-context recall is what a KV cache stored in FP8
    without calibrated scales loses first.
  - C(coding) asks what small fixed Python functions return for given inputs; the answer is read as a Python literal and
    must equal the exact expected value.
  - Each check passes when its share of correct answers reaches its threshold.
  - The answers and their hash form a state (RV(state)). Given the last good state in O(previous), the module reports which
    answers changed (RV(drift)); keeping the state between deploys is the caller's job (the C(benchmark) role keeps it on
    the controller).
  - Optionally runs SGLang's own C(python -m sglang.test.run_eval) (gsm8k by default) and checks its score against a bar
    (0.95, the bar of SGLang's CI for this model), when SGLang is importable by O(run_eval.python).
author:
  - llmops maintainers (@llmops)
extends_documentation_fragment:
  - llmops.sglang.attributes
  - llmops.sglang.attributes.info_module
  - llmops.sglang.http_client
  - llmops.sglang.http_client.tls
  - llmops.sglang.http_client.proxy
options:
  url:
    description:
      - Base URL of the SGLang server, as seen from where the module runs.
    type: str
    default: http://127.0.0.1:30000
  model:
    description:
      - Model name sent in requests. Default is the first entry of C(/v1/models).
    type: str
  checks:
    description:
      - Which built-in checks run.
    type: list
    elements: str
    choices: [needle, coding]
    default: [needle, coding]
  needle_contexts:
    description:
      - Haystack sizes in tokens. Sizes not below the server's context length (C(/v1/models) C(max_model_len)) are skipped
        with a caveat.
    type: list
    elements: int
    default: [4096, 32768, 131072]
  needle_depths:
    description:
      - Where the needle sits in each haystack, as fractions from 0 (start) to 1 (end).
    type: list
    elements: float
    default: [0.1, 0.5, 0.9]
  needle_min_recall:
    description:
      - Share of needles that must be recalled exactly.
    type: float
    default: 1.0
  coding_min_score:
    description:
      - Share of coding questions that must be answered exactly.
    type: float
    default: 1.0
  chars_per_token:
    description:
      - Characters per token used to size the haystacks (the server's C(prompt_tokens) is reported when it sends usage).
      - At most 64; a haystack (context times O(chars_per_token)) has at most 64 Mi characters.
    type: float
    default: 4.0
  seed:
    description:
      - Seed of the haystacks, the needle values and the requests' sampling.
    type: int
    default: 0
  max_tokens:
    description:
      - Output token limit per answer.
    type: int
    default: 64
  parallel:
    description:
      - Questions in flight at once (at most 256).
    type: int
    default: 2
  timeout:
    description:
      - Seconds allowed for each question (a 128K-token prefill takes a while), at most a week (604800).
    type: float
    default: 900
  disable_thinking:
    description:
      - Send C(chat_template_kwargs.enable_thinking=false) so reasoning models answer directly.
    type: bool
    default: true
  extra_body:
    description:
      - Extra fields merged into every request body.
    type: dict
  previous:
    description:
      - The last good RV(state) (C({hash, answers, ...})), to report drift against. Empty means first run.
    type: dict
  fail_on_drift:
    description:
      - Fail when an answer differs from O(previous). Off by default, since batching may change greedy output
        slightly; drift is always reported.
    type: bool
    default: false
  fail_on_failure:
    description:
      - Fail when a check is below its threshold. When false the result still carries RV(checks) and RV(passed).
    type: bool
    default: true
  run_eval:
    description:
      - SGLang's C(sglang.test.run_eval), run on the host where the module runs.
    type: dict
    suboptions:
      enabled:
        description: Run it.
        type: bool
        default: false
      python:
        description: Python interpreter with SGLang installed. When SGLang cannot be imported by it, the eval is skipped with a caveat.
        type: str
        default: python3
      eval_name:
        description: C(--eval-name).
        type: str
        default: gsm8k
      num_examples:
        description: C(--num-examples).
        type: int
        default: 200
      num_threads:
        description: C(--num-threads).
        type: int
        default: 64
      min_score:
        description: The score the eval must reach.
        type: float
        default: 0.95
      timeout:
        description: Seconds allowed for the whole eval.
        type: float
        default: 3600
      extra_args:
        description: Extra command-line arguments.
        type: list
        elements: str
        default: []
notes:
  - Changes nothing, so it runs in check mode and never reports C(changed).
  - A question the chat endpoint did not answer (an HTTP error such as 404 or 401, a refused connection, a timeout, an
    answer that is not a chat stream) is not a wrong answer - the module fails with that error, whatever
    O(fail_on_failure) says, and grades, compares and keeps nothing (RV(state) and RV(answers) stay empty).
  - Greedy decoding is deterministic for one server build and configuration, but not bit-exact across batch sizes and
    kernels; that is why drift is reported and does not fail by default.
seealso:
  - module: llmops.sglang.benchmark
"""

EXAMPLES = r"""
- name: Run the canary against the last good answers
  llmops.sglang.accuracy_canary:
    api_key: "{{ sglang_api_key }}"
    previous: "{{ lookup('ansible.builtin.file', 'reports/' ~ inventory_hostname ~ '/canary-state.json') | from_json }}"
  register: canary

- name: Recall only, up to 64K tokens, plus gsm8k with SGLang's own eval
  llmops.sglang.accuracy_canary:
    checks: [needle]
    needle_contexts: [8192, 65536]
    needle_depths: [0.0, 0.25, 0.5, 0.75, 1.0]
    run_eval:
      enabled: true
      python: /opt/sglang/venv/bin/python
"""

RETURN = r"""
passed:
  description: Whether every enabled check reached its threshold (and O(fail_on_drift) found no drift).
  returned: always
  type: bool
model:
  description: The model name sent in requests.
  returned: always
  type: str
checks:
  description: Per check (C(needle), C(coding), C(run_eval)), the verdict.
  returned: always
  type: dict
  contains:
    needle:
      description:
        - C(enabled), C(passed), C(score), C(threshold), C(correct), C(total), C(errors) (by kind) and C(items).
        - Each item has C(id), C(expected), C(answer), C(correct), C(error), C(context_tokens), C(depth), C(prompt_depth)
          (the needle's place in the whole prompt), C(prompt_chars), C(prompt_tokens) (server-reported) and C(latency_s).
      type: dict
    coding:
      description: As for C(needle); items have C(call) instead of the needle fields.
      type: dict
    run_eval:
      description: C(enabled), C(available), C(passed), C(score), C(threshold), C(eval_name), C(command), C(rc), C(error).
      type: dict
  sample:
    needle:
      enabled: true
      passed: true
      score: 1.0
      threshold: 1.0
      correct: 9
      total: 9
      errors: {}
      items:
        - {id: needle-4096-0.10, expected: K7QX-4M2D-9PLA, answer: K7QX-4M2D-9PLA, correct: true, error: null,
           context_tokens: 4096, depth: 0.1, prompt_depth: 0.1012, prompt_chars: 16344, prompt_tokens: 4211}
answers:
  description: Answer text per question id (null when the request failed).
  returned: always
  type: dict
hash:
  description: sha256 of RV(answers) (canonical JSON).
  returned: always
  type: str
drift:
  description: Comparison with O(previous).
  returned: always
  type: dict
  contains:
    compared:
      description: Whether a previous state was given.
      type: bool
    drift:
      description: Whether an answer changed.
      type: bool
    previous_hash:
      description: Hash of the previous state.
      type: str
    hash:
      description: Hash of this run's answers.
      type: str
    changed:
      description: Ids whose answer changed.
      type: list
      elements: str
    added:
      description: Ids not in the previous state.
      type: list
      elements: str
    removed:
      description: Ids of the previous state not asked this time.
      type: list
      elements: str
state:
  description: What to keep as the last good state when RV(passed) is true (C(version), C(hash), C(model), C(answers), C(correct)).
  returned: always
  type: dict
caveats:
  description: Skipped sizes, an unavailable run_eval; each is also printed as a task warning.
  returned: always
  type: list
  elements: str
error:
  description: C({kind, message}) when the server could not be reached or the chat endpoint did not answer a question, else null.
  returned: always
  type: dict
summary:
  description: One line for the end-of-play table.
  returned: always
  type: str
  sample: "needle 9/9, coding 8/8, no drift"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.bench._client import Client, discover
from ansible_collections.llmops.sglang.plugins.module_utils.bench._serving import run_process
from ansible_collections.llmops.sglang.plugins.module_utils._canary import (
    CHECKS,
    FIND_SGLANG,
    CanaryError,
    answers_of,
    check_options,
    request_failure,
    ask_all,
    build_items,
    compare,
    parse_run_eval,
    run_eval_argv,
    score_check,
    state_of,
    summary_line,
)
from ansible_collections.llmops.sglang.plugins.module_utils._http import MAX_SECONDS, TLS_ARGUMENT_SPEC, OptionError, tls_from_params
from ansible_collections.llmops.sglang.plugins.module_utils._server_info import ServerInfoError

# Requests in flight at once: each is a thread.
MAX_PARALLEL = 256

RUN_EVAL_SPEC = dict(
    enabled=dict(type="bool", default=False),
    python=dict(type="str", default="python3"),
    eval_name=dict(type="str", default="gsm8k"),
    num_examples=dict(type="int", default=200),
    num_threads=dict(type="int", default=64),
    min_score=dict(type="float", default=0.95),
    timeout=dict(type="float", default=3600),
    extra_args=dict(type="list", elements="str", default=[]),
)


def _fraction(name, value):
    if not 0.0 <= value <= 1.0:
        raise CanaryError("%s must be a fraction between 0 and 1, got %r" % (name, value))


def check_timeout(name, value):
    if not 0 < value <= MAX_SECONDS:
        raise CanaryError("%s must be a number of seconds in (0, %d], got %r" % (name, MAX_SECONDS, value))


def do_run_eval(client, cfg, model, api_key, caveats):
    res = {"enabled": True, "available": None, "passed": False, "score": None, "threshold": cfg["min_score"],
           "eval_name": cfg["eval_name"], "command": None, "rc": None, "error": None, "output_tail": None}
    probe = run_process([cfg["python"], "-c", FIND_SGLANG], timeout=60)
    if probe["rc"] != 0:
        res["available"] = False
        res["passed"] = None
        res["error"] = ("SGLang is not importable by %s (%s): run_eval skipped"
                        % (cfg["python"], probe["error"] or "exit code %s" % probe["rc"]))
        caveats.append(res["error"])
        return res
    res["available"] = True
    argv = run_eval_argv(cfg["python"], client.base, cfg["eval_name"], cfg["num_examples"], cfg["num_threads"], model,
                         cfg["extra_args"])
    res["command"] = argv
    # run_eval reads the key from OPENAI_API_KEY; it never appears on the command line.
    proc = run_process(argv, {"OPENAI_API_KEY": api_key or "EMPTY"}, timeout=cfg["timeout"])
    res["rc"] = proc["rc"]
    parsed = parse_run_eval(proc["stdout"])
    res["score"] = parsed["score"]
    res["output_tail"] = "\n".join((proc["stdout"] or proc["stderr_tail"]).strip().splitlines()[-8:])
    if proc["error"] or proc["rc"] != 0 or parsed["score"] is None:
        res["error"] = proc["error"] or ("exit code %s" % proc["rc"] if proc["rc"] != 0 else "no 'Score:' line in its output")
        res["error"] += ": " + " | ".join(proc["stderr_tail"].strip().splitlines()[-3:])
        return res
    res["passed"] = parsed["score"] >= cfg["min_score"]
    return res


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", default="http://127.0.0.1:30000"),
            api_key=dict(type="str", no_log=True),
            model=dict(type="str"),
            checks=dict(type="list", elements="str", choices=list(CHECKS), default=list(CHECKS)),
            needle_contexts=dict(type="list", elements="int", default=[4096, 32768, 131072]),
            needle_depths=dict(type="list", elements="float", default=[0.1, 0.5, 0.9]),
            needle_min_recall=dict(type="float", default=1.0),
            coding_min_score=dict(type="float", default=1.0),
            chars_per_token=dict(type="float", no_log=False, default=4.0),
            seed=dict(type="int", default=0),
            max_tokens=dict(type="int", no_log=False, default=64),
            parallel=dict(type="int", default=2),
            timeout=dict(type="float", default=900),
            disable_thinking=dict(type="bool", default=True),
            extra_body=dict(type="dict"),
            previous=dict(type="dict"),
            fail_on_drift=dict(type="bool", default=False),
            fail_on_failure=dict(type="bool", default=True),
            run_eval=dict(type="dict", options=RUN_EVAL_SPEC),
            **TLS_ARGUMENT_SPEC,
            use_proxy=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    run_eval_cfg = p["run_eval"] or dict((k, v["default"]) for k, v in RUN_EVAL_SPEC.items())
    result = {"passed": False, "model": p["model"], "checks": {}, "answers": {}, "hash": None, "drift": {}, "state": {},
              "caveats": [], "error": None, "summary": ""}
    try:
        _fraction("needle_min_recall", p["needle_min_recall"])
        _fraction("coding_min_score", p["coding_min_score"])
        if p["max_tokens"] < 1 or p["parallel"] < 1:
            raise CanaryError("max_tokens and parallel must be >= 1")
        if p["parallel"] > MAX_PARALLEL:
            raise CanaryError("parallel must be at most %d (one thread per request in flight), got %d" % (MAX_PARALLEL, p["parallel"]))
        check_timeout("timeout", p["timeout"])
        check_timeout("run_eval.timeout", run_eval_cfg["timeout"])
        if not p["checks"] and not run_eval_cfg["enabled"]:
            raise CanaryError("nothing to check: list checks (needle, coding) or enable run_eval")
        check_options(p["checks"], p["needle_contexts"], p["needle_depths"], p["chars_per_token"])
        client = Client(p["url"], p["api_key"], p["timeout"], tls_from_params(p), p["use_proxy"])
    except (CanaryError, ServerInfoError, OptionError) as exc:
        module.fail_json(msg=str(exc))
    model, max_len, _spec, err = discover(client)
    if err is not None:
        result["error"] = {"kind": err["class"], "message": err["message"]}
        result["summary"] = "FAILED (%s)" % err["class"]
        module.fail_json(msg="accuracy canary against %s failed: %s" % (client.base, err["message"]), changed=False, **result)
    # the prompts are built once the server answers (the largest are megabytes)
    items, result["caveats"] = build_items(p["checks"], p["seed"], p["needle_contexts"], p["needle_depths"], p["chars_per_token"],
                                           max_len)
    model = result["model"] = p["model"] or model or "default"

    ask_all(client, items, model, p["seed"], p["max_tokens"], p["parallel"], p["disable_thinking"], p["extra_body"], p["timeout"])
    failure = request_failure(items)
    if failure is not None:
        # no answer is not a wrong answer: nothing is graded, compared or kept
        result["error"] = {"kind": failure["kind"], "message": failure["message"]}
        result["summary"] = "FAILED (%s)" % failure["kind"]
        module.fail_json(msg="accuracy canary against %s failed: %s; nothing was graded or kept" % (client.base, failure["message"]),
                         changed=False, **result)
    thresholds = {"needle": p["needle_min_recall"], "coding": p["coding_min_score"]}
    checks = dict((name, score_check(items, name, thresholds[name])) for name in p["checks"])
    if run_eval_cfg["enabled"]:
        checks["run_eval"] = do_run_eval(client, run_eval_cfg, model, p["api_key"], result["caveats"])
    answers = answers_of(items)
    drift = compare(p["previous"], answers)
    passed = all(c["passed"] is not False for c in checks.values()) and any(c["passed"] for c in checks.values())
    if drift["drift"] and p["fail_on_drift"]:
        passed = False
    result.update(passed=passed, checks=checks, answers=answers, hash=drift["hash"], drift=drift,
                  state=state_of(answers, items, model), summary=summary_line(checks, drift))
    for caveat in result["caveats"]:
        module.warn(caveat)

    reasons = []
    for name, c in checks.items():
        if c["passed"] is False:
            detail = ("score %s < %s" % (c["score"], c["threshold"])) if name == "run_eval" else \
                ("%d/%d correct, need %.0f%%" % (c["correct"], c["total"], c["threshold"] * 100))
            wrong = [it["id"] for it in c.get("items", []) if not it.get("correct")][:6]
            reasons.append("%s %s%s%s" % (name, detail, (" (wrong: %s)" % ", ".join(wrong)) if wrong else "",
                                          (": " + c["error"]) if c.get("error") else ""))
    if not any(c["passed"] for c in checks.values()) and not reasons:
        reasons.append("no check could run")
    if drift["drift"] and p["fail_on_drift"]:
        reasons.append("answers drifted from the last good run: %s" % ", ".join(drift["changed"]))
    if reasons and (p["fail_on_failure"] or (drift["drift"] and p["fail_on_drift"])):
        module.fail_json(msg="accuracy canary failed: " + "; ".join(reasons), changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
