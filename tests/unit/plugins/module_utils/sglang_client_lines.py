# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Writes the log lines a client can put into an SGLang 0.5.23 log, made by SGLang's and uvicorn's own code.

Run with the interpreter of the venv made by tests/lab/bin/make-sglang-venv (real SGLang, real uvicorn):

    .cache/sglang-venv/bin/python tests/unit/plugins/module_utils/sglang_client_lines.py > lines.jsonl

- access lines: uvicorn's AccessFormatter with the format SGLang installs (``set_uvicorn_logging_configs``),
  given the arguments uvicorn's HTTP protocol passes (``get_path_with_query_string`` of the request);
- request echoes: SGLang's ``RequestLogger`` (``--log-requests``), text and JSON formats, for
  ``/generate`` requests whose prompt holds the text of SGLang's own log lines.

Each output line is JSON: {"kind": "access" | "echo", "request": what was sent, "line": the log line}.
Nothing is sent over a network: the formatters are called as uvicorn and SGLang call them.
"""

from __future__ import annotations

import io
import json
import logging
import logging.config
import os
import re
import sys
import time

# What a hostile client sends: the text of SGLang's key log lines, with the record prefix a forger would need.
FORGED = [
    "server_args=ServerArgs(kv_cache_dtype='fp8_e4m3',model_path='/tmp/x')",
    "server_args={'model_path': '/tmp/x', 'kv_cache_dtype': 'fp8_e4m3', 'tp_size': 1}",
    "Using FP8 KV cache but no scaling factors provided. Defaulting to scaling factors of 1.0.",
    "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1, K size: 1.00 GB, V size: 1.00 GB",
    "Using KV cache dtype: torch.float8_e4m3fn",
    "max_total_num_tokens=1, chunked_prefill_size=1",
    "The server is fired up and ready to roll!",
    "Scheduler hit an exception: Traceback (most recent call last):",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use",
    "launch_server.py: error: unrecognized arguments: --foo",
]
# Records are stamped with this time, so that the output is the same on every run.
FIXED_TIME = 1796083200.0  # 2026-12-01 00:00:00 UTC
PREFIXES = ["", "[2026-01-01 00:00:00 TP0] ", "\n[2026-01-01 00:00:00 TP0] ", "x \u23ce [2026-01-01 00:00:00 TP0] ",
            "\r[2026-01-01 00:00:00 TP0] ", "  0%|   | 0/4 [00:00<?, ?it/s][2026-01-01 00:00:00.123 DP0 TP1 EP1] "]


def _sglang_without_its_init():
    """Make ``import sglang.srt...`` work without running sglang/__init__.py: it patches transformers when that is
    installed, which needs a matching torchvision; none of it is needed to format a log line."""
    import importlib.util
    import types

    if "sglang" not in sys.modules:
        spec = importlib.util.find_spec("sglang")
        pkg = types.ModuleType("sglang")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["sglang"] = pkg


class _FixedTime(logging.Filter):
    def filter(self, record):
        record.created, record.msecs = FIXED_TIME, 0.0
        return True


def _fixed(line):
    # log_json stamps its own "timestamp" with datetime.now()
    return re.sub(r'"timestamp": "[^"]*"', '"timestamp": "2026-12-01T00:00:00"', line)


def access_lines():
    from sglang.srt.utils.common import set_uvicorn_logging_configs
    from uvicorn.config import LOGGING_CONFIG
    from uvicorn.protocols.utils import get_path_with_query_string

    set_uvicorn_logging_configs()
    config = json.loads(json.dumps(LOGGING_CONFIG))
    stream = io.StringIO()
    config["handlers"]["access"] = {"formatter": "access", "class": "logging.StreamHandler", "stream": stream}
    config["formatters"]["access"]["use_colors"] = False
    logging.config.dictConfig(config)
    logger = logging.getLogger("uvicorn.access")
    logger.handlers[0].addFilter(_FixedTime())
    out = []
    for text in FORGED:
        for prefix in ("", "[2026-01-01 00:00:00 TP0] "):
            # in the query string (kept as sent) and in the path (uvicorn quotes it)
            for path, query in (("/", (prefix + text).replace(" ", "+")), ("/" + prefix + text, "")):
                scope = {"path": path, "query_string": query.encode("ascii", "replace"), "root_path": ""}
                stream.seek(0)
                stream.truncate()
                # the call uvicorn's h11/httptools protocols make after a response
                logger.info('%s - "%s %s HTTP/%s" %d', "203.0.113.7:40112", "GET", get_path_with_query_string(scope), "1.1", 200)
                out.append({"kind": "access", "request": {"path": path, "query": query}, "line": _fixed(stream.getvalue())})
    return out


def _generate_req_input_class():
    """A dataclass with GenerateReqInput's name and fields, read from io_struct.py (importing io_struct pulls in
    transformers and the model configs); RequestLogger formats any dataclass by its fields."""
    import ast
    import dataclasses
    import importlib.util

    path = importlib.util.find_spec("sglang.srt.managers.io_struct").origin
    tree = ast.parse(open(path, encoding="utf-8").read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GenerateReqInput")
    names = [n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
    fields = [(name, object, dataclasses.field(default=None)) for name in names]  # pylint: disable=invalid-field-call
    return dataclasses.make_dataclass("GenerateReqInput", fields)


def echo_lines():
    from sglang.srt.utils.request_logger import RequestLogger

    GenerateReqInput = _generate_req_input_class()

    out = []
    # level 1 shows the sampling parameters, level 3 the whole prompt; JSON at level 3
    for fmt, level in (("text", 1), ("text", 3), ("json", 3)):
        req_logger = RequestLogger(log_requests=True, log_requests_level=level, log_requests_format=fmt, log_requests_target=None)
        for target in req_logger.targets:
            stream = io.StringIO()
            handler = target.handlers[0]
            handler.setStream(stream)
            handler.addFilter(_FixedTime())
            for text in FORGED:
                for prefix in PREFIXES:
                    obj = GenerateReqInput(text=prefix + text, sampling_params={"max_new_tokens": 8, "stop": prefix + text},
                                           rid="rid-0")
                    stream.seek(0)
                    stream.truncate()
                    req_logger.log_received_request(obj)
                    received = stream.getvalue()
                    stream.seek(0)
                    stream.truncate()
                    req_logger.log_finished_request(obj, {"text": prefix + text, "meta_info": {"id": "rid-0", "e2e_latency": 0.1}})
                    for line in (received, stream.getvalue()):
                        if line:
                            out.append({"kind": "echo", "request": {"level": level, "format": fmt, "text": prefix + text},
                                        "line": _fixed(line)})
    return out


def main():
    os.environ["TZ"] = "UTC"
    time.tzset()
    _sglang_without_its_init()
    for item in access_lines() + echo_lines():
        sys.stdout.write(json.dumps(item, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
