#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: benchmark
short_description: Measure an SGLang deployment's throughput and latency at several concurrency levels
version_added: 0.1.0
description:
  - Streams chat completions (C(POST /v1/chat/completions), OpenAI-compatible) to the server at each concurrency level in
    turn, with the Python standard library only (urllib and threads), so it runs on the managed host or delegated to the
    controller without new dependencies.
  - Per level it reports aggregate output tok/s (all measured requests' output tokens over the level's wall time),
    per-request output tok/s (decode rate after the first token), time to first token (TTFT), inter-token latency (ITL)
    and end-to-end latency as mean/p50/p90/p99, and failed requests by kind. Warm-up requests are excluded.
  - Output tokens come from the server's C(usage) in the final chunk (C(stream_options.include_usage)) when it sends one,
    else from the number of content chunks.
  - Datasets are generated from O(seed), so two runs send the same prompts. C(random) is random words, like the random
    token ids of the reference measurement (random tokens make speculative decoding's draft acceptance close to zero, so a
    warning is returned when speculation is on). C(coding) is synthetic but realistic Python repositories with a coding
    task, sized to O(input_tokens).
  - With O(engine=sglang_bench_serving), SGLang's own C(python -m sglang.bench_serving) runs on the host instead (random
    dataset, one run per level) and its printed summary is parsed into the same per-level report.
  - Compares each level's aggregate output tok/s with O(baseline) and fails below O(min_fraction) of it (the regression gate).
  - Returns an SVG chart of throughput and latency against concurrency (RV(chart_svg)).
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
      - Base URL of the SGLang server, as seen from where the module runs (C(http://HOST:PORT)).
    type: str
    default: http://127.0.0.1:30000
  model:
    description:
      - Model name sent in requests. Default is the first entry of C(/v1/models).
    type: str
  engine:
    description:
      - C(builtin) is this module's own streaming client.
      - C(sglang_bench_serving) runs O(python) C(-m) O(bench_serving_module) on the host (needs SGLang and its tokenizer
        there); only the C(random) dataset and request-count bounds apply.
    type: str
    choices: [builtin, sglang_bench_serving]
    default: builtin
  concurrency:
    description:
      - Concurrency levels, measured in this order. Each level keeps this many requests in flight (closed loop), at
        most 4096.
    type: list
    elements: int
    default: [1, 32]
  dataset:
    description:
      - C(random) (random words, like random token ids) or C(coding) (long-context coding prompts).
    type: str
    choices: [random, coding]
    default: random
  input_tokens:
    description:
      - Target prompt length in tokens (approximated as characters divided by O(chars_per_token)).
    type: int
    default: 1024
  output_tokens:
    description:
      - Output tokens per request (C(max_tokens); with O(ignore_eos) every request generates exactly this many).
    type: int
    default: 512
  rounds:
    description:
      - Requests per level are O(rounds) times the concurrency, unless O(num_requests) or O(duration) is set.
    type: int
    default: 3
  num_requests:
    description:
      - Requests per level (a count bound).
    type: int
  duration:
    description:
      - Seconds per level (a time bound; requests started before the end finish and count), at most a week (604800).
        Wins over O(num_requests).
      - Not supported with O(engine=sglang_bench_serving).
    type: float
  warmup_requests:
    description:
      - Requests sent before each level (other prompts, 32 output tokens at most) and left out of the results.
    type: int
    default: 2
  timeout:
    description:
      - Seconds allowed for each request, from sending it to the end of the stream, at most a week (604800).
      - With O(engine=sglang_bench_serving), the limit for each level's bench_serving run.
    type: float
    default: 600
  seed:
    description:
      - Seed of the prompts and of the requests' sampling.
    type: int
    default: 0
  chars_per_token:
    description:
      - Characters per token used to size prompts (English and code average about 4 with Qwen tokenizers), at most 64.
        A prompt (O(input_tokens) times O(chars_per_token)) has at most 64 Mi characters.
    type: float
    default: 4.0
  speculative:
    description:
      - Whether the server uses speculative decoding (only changes the warning for the random dataset).
      - Default is what C(/server_info) says (C(speculative_algorithm)).
    type: bool
  ignore_eos:
    description:
      - Send SGLang's C(ignore_eos) so every request generates O(output_tokens) tokens.
    type: bool
    default: true
  extra_body:
    description:
      - "Extra fields merged into every request body, e.g. C({chat_template_kwargs: {enable_thinking: false}})."
    type: dict
  baseline:
    description:
      - "Expected aggregate output tok/s per concurrency level, e.g. C({1: 172, 32: 2100}). Empty disables the gate."
    type: dict
  min_fraction:
    description:
      - The gate fails a level below this fraction of its baseline.
    type: float
    default: 0.9
  fail_on_regression:
    description:
      - Fail when the gate fails. When false the result still carries RV(gate).
    type: bool
    default: true
  python:
    description:
      - Python interpreter with SGLang installed, for O(engine=sglang_bench_serving).
    type: str
    default: python3
  bench_serving_module:
    description:
      - Module run with C(python -m) for O(engine=sglang_bench_serving) (SGLang 0.5.23 also has C(sglang.benchmark.serving)).
    type: str
    default: sglang.bench_serving
  tokenizer:
    description:
      - Tokenizer path or name passed to bench_serving (C(--tokenizer)); needed when O(model) is not a path it can load.
    type: str
  bench_serving_args:
    description:
      - Extra arguments appended to the bench_serving command line.
    type: list
    elements: str
    default: []
  chart:
    description:
      - Return RV(chart_svg).
    type: bool
    default: true
  chart_title:
    description:
      - Title of the chart.
    type: str
    default: SGLang benchmark
notes:
  - Sends real traffic but changes nothing, so it runs in check mode and never reports C(changed).
  - A failed request never raises; it is counted by kind (C(refused), C(unreachable), C(tls), C(timeout),
    C(unauthorized), C(loading) (HTTP 503), C(not_found), C(http_error), C(malformed_chunk), C(too_large) (an event
    line over 4 MiB or an answer over 256 MiB), C(server_error), C(incomplete_stream), C(empty),
    C(disconnected)).
    When the server cannot be reached, or every request of a level fails, the module fails with that kind and message.
seealso:
  - module: llmops.sglang.accuracy_canary
  - module: llmops.sglang.server_info
"""

EXAMPLES = r"""
- name: Measure at 1 and 32 concurrent requests and gate on the reference numbers
  llmops.sglang.benchmark:
    api_key: "{{ sglang_api_key }}"
    concurrency: [1, 32]
    baseline: {1: 172, 32: 2100}
  register: bench

- name: Long-context coding prompts, 2 minutes per level, from the controller
  llmops.sglang.benchmark:
    url: "http://{{ inventory_hostname }}:30000"
    dataset: coding
    input_tokens: 32768
    output_tokens: 1024
    concurrency: [1, 4, 16]
    duration: 120
  delegate_to: localhost

- name: SGLang's own bench_serving from the server's venv
  llmops.sglang.benchmark:
    engine: sglang_bench_serving
    python: /opt/sglang/venv/bin/python
    tokenizer: /models/Qwen3.5-397B-A17B-NVFP4
"""

RETURN = r"""
ok:
  description: Whether every level ran (some requests may still have failed; see RV(levels)).
  returned: always
  type: bool
engine:
  description: The engine used.
  returned: always
  type: str
  sample: builtin
url:
  description: The base URL measured.
  returned: always
  type: str
model:
  description: The model name sent in requests.
  returned: always
  type: str
  sample: qwen3.5-397b
dataset:
  description: The dataset used.
  returned: always
  type: str
speculative_algorithm:
  description: C(speculative_algorithm) of C(/server_info), or null.
  returned: always
  type: str
levels:
  description: One report per measured concurrency level.
  returned: always
  type: list
  elements: dict
  contains:
    concurrency:
      description: Requests kept in flight.
      type: int
    requests:
      description: Measured requests sent (warm-up excluded).
      type: int
    succeeded:
      description: Requests that streamed to the end.
      type: int
    failed:
      description: Requests that failed.
      type: int
    duration_s:
      description: Wall time from the first send to the last answer.
      type: float
    output_tokens:
      description: Output tokens of the succeeded requests.
      type: int
    aggregate_output_tok_s:
      description: RV(levels[].output_tokens) divided by RV(levels[].duration_s).
      type: float
    per_request_output_tok_s:
      description: Decode rate of each request after its first token, C(mean), C(p50) and C(min).
      type: dict
    ttft_ms:
      description: Time to first token, C(mean), C(p50), C(p90), C(p99).
      type: dict
    itl_ms:
      description: Inter-token latency (gaps between content chunks), C(mean), C(p50), C(p90), C(p99).
      type: dict
    e2e_ms:
      description: Request latency, C(mean), C(p50), C(p90), C(p99).
      type: dict
    errors:
      description: Failed requests by kind.
      type: dict
      sample: {timeout: 1}
    error_examples:
      description: Up to three distinct failure messages.
      type: list
      elements: str
    token_count_source:
      description: C(usage) (server-reported), C(chunks) (counted), C(mixed) or C(bench_serving).
      type: str
  sample:
    - concurrency: 1
      requests: 3
      succeeded: 3
      failed: 0
      duration_s: 9.1
      output_tokens: 1536
      aggregate_output_tok_s: 168.8
      per_request_output_tok_s: {mean: 171.9, p50: 171.9, min: 171.2}
      ttft_ms: {mean: 80.2, p50: 80.1, p90: 80.6, p99: 80.7}
      itl_ms: {mean: 5.82, p50: 5.81, p90: 5.9, p99: 6.1}
      errors: {}
gate:
  description: The regression gate.
  returned: always
  type: dict
  contains:
    enabled:
      description: Whether a baseline was given.
      type: bool
    passed:
      description: False when a level is below O(min_fraction) of its baseline, or no baseline level was measured.
      type: bool
    checks:
      description: Per baseline level, C(concurrency), C(baseline), C(measured), C(ratio), C(passed), C(note).
      type: list
      elements: dict
    reason:
      description: Why the gate failed (or is disabled).
      type: str
caveats:
  description:
    - Caveats about the numbers (for example random prompts with speculative decoding). Each is also printed as a task
      warning.
  returned: always
  type: list
  elements: str
error:
  description: C({kind, message}) when the run stopped (server unreachable, every request of a level failed), else null.
  returned: always
  type: dict
summary:
  description: One line for the end-of-play table.
  returned: always
  type: str
  sample: "C=1 169 tok/s (98%), C=32 2133 tok/s (102%); gate pass"
commands:
  description: The bench_serving command lines run (API key not included; it is passed in the environment).
  returned: with engine sglang_bench_serving
  type: list
  elements: list
chart_svg:
  description: SVG chart of aggregate and per-request tok/s and latency percentiles against concurrency.
  returned: when chart is true
  type: str
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.bench._chart import render_chart
from ansible_collections.llmops.sglang.plugins.module_utils.bench._client import Client, discover
from ansible_collections.llmops.sglang.plugins.module_utils.bench._gate import evaluate_gate, normalize_baseline, summary_line
from ansible_collections.llmops.sglang.plugins.module_utils.bench._prompts import DATASETS, BenchmarkError
from ansible_collections.llmops.sglang.plugins.module_utils.bench._runner import ENGINES, run_benchmark, validate_options
from ansible_collections.llmops.sglang.plugins.module_utils.bench._serving import bench_serving_argv, bench_serving_level, parse_bench_serving, run_process
from ansible_collections.llmops.sglang.plugins.module_utils._http import MAX_SECONDS, TLS_ARGUMENT_SPEC, OptionError, tls_from_params
from ansible_collections.llmops.sglang.plugins.module_utils._server_info import ServerInfoError


def run_bench_serving(client, p):
    """One bench_serving run per level; the same result shape as run_benchmark."""
    out = {"ok": False, "engine": "sglang_bench_serving", "url": client.base, "model": p["model"], "dataset": "random",
           "input_tokens": p["input_tokens"], "output_tokens": p["output_tokens"], "levels": [], "warnings": [], "error": None,
           "speculative_algorithm": None, "commands": []}
    model, _max_len, spec, err = discover(client)
    if err is not None:
        out["error"] = {"kind": err["class"], "message": err["message"]}
        return out
    out["model"] = p["model"] or model or "default"
    out["speculative_algorithm"] = spec
    speculative = p["speculative"] if p["speculative"] is not None else bool(spec)
    if speculative:
        out["warnings"].append("speculative decoding is on and bench_serving's random dataset makes draft acceptance close to "
                               "zero: these numbers do not show what speculation gives on real text")
    env = {"OPENAI_API_KEY": p["api_key"]} if p["api_key"] else {}
    workdir = tempfile.mkdtemp(prefix="llmops-bench-")
    try:
        for c in p["concurrency"]:
            n = p["num_requests"] or c * p["rounds"]
            argv = bench_serving_argv(p["python"], p["bench_serving_module"], client.base, out["model"], c, n, p["input_tokens"],
                                      p["output_tokens"], p["seed"], p["warmup_requests"], p["tokenizer"],
                                      os.path.join(workdir, "c%d.jsonl" % c), p["bench_serving_args"])
            out["commands"].append(argv)
            proc = run_process(argv, env, timeout=p["timeout"])
            parsed = parse_bench_serving(proc["stdout"]) if proc["stdout"] else None
            if proc["error"] or proc["rc"] != 0 or parsed is None:
                why = proc["error"] or ("exit code %s" % proc["rc"] if proc["rc"] != 0 else "no 'Serving Benchmark Result' summary")
                tail = (proc["stderr_tail"] or proc["stdout"][-2000:]).strip().splitlines()[-5:]
                out["error"] = {"kind": "bench_serving_failed", "message": "%s -m %s at concurrency %d failed (%s): %s"
                                % (p["python"], p["bench_serving_module"], c, why, " | ".join(tail) or "no output")}
                return out
            out["levels"].append(bench_serving_level(parsed, c, n))
    finally:
        for name in os.listdir(workdir):
            os.unlink(os.path.join(workdir, name))
        os.rmdir(workdir)
    out["ok"] = True
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", default="http://127.0.0.1:30000"),
            api_key=dict(type="str", no_log=True),
            model=dict(type="str"),
            engine=dict(type="str", choices=list(ENGINES), default="builtin"),
            concurrency=dict(type="list", elements="int", default=[1, 32]),
            dataset=dict(type="str", choices=list(DATASETS), default="random"),
            input_tokens=dict(type="int", no_log=False, default=1024),
            output_tokens=dict(type="int", no_log=False, default=512),
            rounds=dict(type="int", default=3),
            num_requests=dict(type="int"),
            duration=dict(type="float"),
            warmup_requests=dict(type="int", default=2),
            timeout=dict(type="float", default=600),
            seed=dict(type="int", default=0),
            chars_per_token=dict(type="float", no_log=False, default=4.0),
            speculative=dict(type="bool"),
            ignore_eos=dict(type="bool", default=True),
            extra_body=dict(type="dict"),
            baseline=dict(type="dict"),
            min_fraction=dict(type="float", default=0.9),
            fail_on_regression=dict(type="bool", default=True),
            python=dict(type="str", default="python3"),
            bench_serving_module=dict(type="str", default="sglang.bench_serving"),
            tokenizer=dict(type="str", no_log=False),
            bench_serving_args=dict(type="list", elements="str", default=[]),
            **TLS_ARGUMENT_SPEC,
            use_proxy=dict(type="bool", default=True),
            chart=dict(type="bool", default=True),
            chart_title=dict(type="str", default="SGLang benchmark"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        if not 0 < p["timeout"] <= MAX_SECONDS:
            raise BenchmarkError("timeout must be a number of seconds in (0, %d], got %r" % (MAX_SECONDS, p["timeout"]))
        if not 0 < p["min_fraction"] <= 10:
            raise BenchmarkError("min_fraction must be > 0 (0.9 = fail below 90%% of the baseline), got %r" % (p["min_fraction"],))
        validate_options(p["concurrency"], p["dataset"], p["input_tokens"], p["output_tokens"], p["rounds"], p["num_requests"],
                         p["duration"], p["warmup_requests"], p["chars_per_token"])
        baseline = normalize_baseline(p["baseline"])
        client = Client(p["url"], p["api_key"], p["timeout"], tls_from_params(p), p["use_proxy"])
        if p["engine"] == "sglang_bench_serving":
            if p["dataset"] != "random":
                raise BenchmarkError("engine sglang_bench_serving runs its random dataset only: set dataset to random or use "
                                     "engine builtin for dataset %s" % p["dataset"])
            if p["duration"] is not None:
                raise BenchmarkError("engine sglang_bench_serving takes request counts (rounds, num_requests), not duration")
            if p["ca_path"] or p["client_cert"]:
                raise BenchmarkError("engine sglang_bench_serving sends its own requests and takes no ca_path or client_cert: "
                                     "use engine builtin for a server that needs them")
            result = run_bench_serving(client, p)
        else:
            result = run_benchmark(client, p["concurrency"], p["dataset"], p["input_tokens"], p["output_tokens"], p["rounds"],
                                   p["num_requests"], p["duration"], p["warmup_requests"], p["seed"], p["model"],
                                   p["chars_per_token"], p["speculative"], p["extra_body"], p["ignore_eos"])
        gate = evaluate_gate(result["levels"], baseline, p["min_fraction"])
    except (BenchmarkError, ServerInfoError, OptionError) as exc:
        module.fail_json(msg=str(exc))

    if result["error"] and gate["enabled"]:
        gate.update(passed=False, reason="not evaluated: the benchmark stopped (%s)" % result["error"]["kind"])
    result["gate"] = gate
    # Caveats are printed as task warnings and kept in the result as caveats.
    result["caveats"] = result.pop("warnings")
    for caveat in result["caveats"]:
        module.warn(caveat)
    result["summary"] = summary_line(result["levels"], gate) if result["levels"] else "no level measured"
    if result["error"]:
        result["summary"] = "FAILED (%s)" % result["error"]["kind"]
    if p["chart"]:
        subtitle = "%s, %s dataset, %d input / %d output tokens, %s" % (result["model"], result["dataset"], p["input_tokens"],
                                                                        p["output_tokens"], result["engine"])
        result["chart_svg"] = render_chart(result["levels"], baseline, p["min_fraction"] if baseline else None,
                                           p["chart_title"], subtitle)
    if result["error"]:
        module.fail_json(msg="benchmark of %s failed: %s" % (result["url"], result["error"]["message"]), changed=False, **result)
    if gate["enabled"] and not gate["passed"] and p["fail_on_regression"]:
        module.fail_json(msg="throughput regression: %s" % gate["reason"], changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
