# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the fuzz suite starts from: the real samples under tests/fixtures, and a mutator that changes them (lines dropped,
doubled, swapped, cut, spliced with hostile text; JSON values replaced by values of other types or nested deep) or
replaces them with random text and bytes.

The mutator draws from a random.Random seeded by hypothesis (one integer per case): hypothesis picks and records the
seeds, plain Python does the rest, fast enough for 100,000 cases in the units stage."""

import json
import pathlib
import string


ROOT = pathlib.Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"


def _files(*patterns):
    found = []
    for pattern in patterns:
        found.extend(sorted(p for p in FIXTURES.glob(pattern) if p.is_file()))
    return found


def _texts(*patterns):
    return [p.read_text(encoding="utf-8", errors="replace") for p in _files(*patterns)]


def _jsons(*patterns):
    out = []
    for path in _files(*patterns):
        try:
            out.append(json.loads(path.read_text(encoding="utf-8")))
        except ValueError:
            pass
    return out


# ---- real samples ----------------------------------------------------------------------------

LOGS = [p.read_bytes() for p in _files("sglang-logs/*.log")]
SMI = _texts("gpu-outputs/*.txt", "gpu/*/*.txt")
CUOBJDUMP = _texts("cuobjdump/*.out", "cuobjdump/*.err", "cuobjdump/*.txt")
NVCC = _texts("gpu-outputs/3[4-7]-nvcc*.txt", "cuobjdump/nvcc-*.txt")
CMAKE = _texts("cmake_plan/*.json", "cmake_plan/*.log", "cmake_plan/*.ninja")
CONFIGS = _jsons("checkpoints/*/config.json")
QUANT = _jsons("quant-configs/*.json", "checkpoints/*/hf_quant_config.json")
INDEXES = _jsons("checkpoints/*/model.safetensors.index.json")
SAFETENSORS = [p.read_bytes() for p in _files("checkpoints/*/*.safetensors")]
ROUTER = _jsons("router/*.json")
GPU_INFO = _jsons("gpu/*/gpu_info.json")
TOOLKIT = _jsons("gpu/*/cuda_toolkit_info*.json")
SERVER_INFO = _jsons("server-info/*.json")
TOOL_OUTPUTS = _texts("tool-outputs/*.txt")
SSE = [p.read_bytes() for p in _files("tool-outputs/*.sse")]
# journalctl -o json entries recorded from journald 252 (a unit's stdout, PID 1's messages, forged client entries).
JOURNAL = [json.loads(line) for p in _files("tool-outputs/journal/*.jsonl") for line in p.read_text(encoding="utf-8").splitlines()]
# Lines of the real logs that the KV parsers read.
KV_LINES = [line for log in LOGS for line in log.decode("utf-8", "replace").splitlines()
            if "KV Cache is allocated" in line or "max_total_num_tokens" in line]
# SGLang 0.5.23's samples in both spellings (tests/fixtures/prometheus/MANIFEST.md), and lines of the exposition format
# its metrics use (labels of several ranks, NaN, a timestamp).
METRICS = ['# HELP sglang:num_running_reqs The number of running requests.\n# TYPE sglang:num_running_reqs gauge\n'
           'sglang:num_running_reqs{model_name="qwen3.5-397b",engine_type="unified",tp_rank="0",pp_rank="0"} 3.0\n'
           'sglang:num_queue_reqs{model_name="qwen3.5-397b",engine_type="unified",tp_rank="0",pp_rank="0"} 0.0\n'
           'sglang:token_usage{model_name="qwen3.5-397b"} 0.02\nsglang:gen_throughput{model_name="m"} NaN\n'
           'sglang:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 12.0 1764600000000\n']
METRICS += _texts("prometheus/*.prom")

for _name, _samples in (("sglang-logs", LOGS), ("nvidia-smi outputs", SMI), ("cuobjdump outputs", CUOBJDUMP),
                        ("configs", CONFIGS), ("quant configs", QUANT), ("safetensors shards", SAFETENSORS),
                        ("router answers", ROUTER), ("gpu_info results", GPU_INFO), ("tool outputs", TOOL_OUTPUTS),
                        ("chat streams", SSE), ("journal entries", JOURNAL)):
    assert _samples, "no %s under tests/fixtures: the fuzz suite starts from them" % _name


# ---- hostile pieces ----------------------------------------------------------------------------

HOSTILE = (
    "", " ", "\x00", "\r", "\t", "\x1b[31m", "\ufeff", "\u202e", "\u00e9", "\U0001f4a5", "%s%d%n",
    "{{ lookup('pipe','id') }}", "../../../etc/passwd", "-", "--", "--api-key", "=", ":", ",", ";", "'", '"', "\\", "[", "]",
    "{", "}", "[[[[[[[[", "NaN", "nan", "inf", "-inf", "Infinity", "1e308", "-1e308", "1e-400", "0", "-1", "-0",
    "00000000000000000001", "18446744073709551616", "9" * 400, "0x10", "1_000", "true", "null", "None",
    "http://[::1", "http://fd00::11:30000", "http://\uff03x", "x" * 5000, "x" * 140000,
    "ERR!", "[N/A]", "[GPU is lost]", "Traceback (most recent call last):", "RuntimeError: Not enough memory",
    "KV Cache is allocated. #tokens: 99999999999999999999, K size: 1e400 GB, V size: 1e400 GB",
    "server_args=ServerArgs(kv_cache_dtype='fp8_e4m3', model_path='/tmp/x')",
)
NUMBERS = (0, 1, -1, 2, 7, 8, 1024, 32768, 131072, 2 ** 31, 2 ** 63, 2 ** 64, 10 ** 30, 10 ** 400, -(10 ** 400), 0.0, -0.0, 0.5,
           0.85, 1.5, 1e-300, 1e308, -1e308, float("inf"), float("-inf"), float("nan"))
_ALPHABET = string.printable + "\x00\x7f\u00e9\u2028\ufeff\U0001f4a5"


class Mutator(object):
    """Random cases from real samples; every choice comes from one seeded random.Random."""

    def __init__(self, rnd):
        self.r = rnd

    def chance(self, n):
        return self.r.randrange(n) == 0

    def pick(self, items):
        return items[self.r.randrange(len(items))]

    # -- scalars
    def junk(self):
        kind = self.r.randrange(6)
        if kind < 3:
            return self.pick(HOSTILE)
        if kind == 3:
            return "".join(self.pick(_ALPHABET) for _i in range(self.r.randrange(40)))
        if kind == 4:
            return "".join(self.pick(string.ascii_letters + string.digits + "._-/:") for _i in range(self.r.randrange(1, 20)))
        return str(self.number())

    def number(self):
        kind = self.r.randrange(4)
        if kind == 0:
            return self.pick(NUMBERS)
        if kind == 1:
            return self.r.randrange(-5, 70000)
        if kind == 2:
            return self.r.uniform(-10.0, 200.0)
        return self.r.randrange(-(2 ** 70), 2 ** 70)

    def scalar(self):
        kind = self.r.randrange(5)
        return (None, self.chance(2), self.number(), self.junk(), self.junk())[kind]

    def value(self, depth=2):
        if depth <= 0 or self.r.randrange(3):
            return self.scalar()
        if self.chance(2):
            return [self.value(depth - 1) for _i in range(self.r.randrange(4))]
        return dict((self.junk(), self.value(depth - 1)) for _i in range(self.r.randrange(4)))

    def same_kind(self, old):
        """Another value of old's type: any int for an int, hostile text or a cut of it for a string."""
        if isinstance(old, bool) or old is None:
            return self.chance(2) if isinstance(old, bool) else None
        if isinstance(old, int):
            return self.pick((self.r.randrange(-5, 70000), self.r.randrange(-(2 ** 70), 2 ** 70), 0, -1))
        if isinstance(old, float):
            return self.pick((self.r.uniform(-10.0, 1e6), float("nan"), float("inf"), 1e308, 0.0))
        return self.junk() if self.r.randrange(3) else old[:self.r.randrange(len(old) + 1)]

    # -- text
    def text(self, samples, max_lines=200):
        """A window of a real sample with a few line-level edits, or random text."""
        if self.chance(10):
            return "".join(self.pick(_ALPHABET) for _i in range(self.r.randrange(400)))
        sample = self.pick(samples)
        if isinstance(sample, bytes):
            sample = sample.decode("utf-8", "replace")
        lines = sample.splitlines(True)
        if len(lines) > max_lines:
            start = self.r.randrange(len(lines) - max_lines + 1)
            lines = lines[start:start + max_lines]
        for _edit in range(self.r.randrange(5)):
            if not lines:
                lines = [self.junk()]
            i = self.r.randrange(len(lines))
            op = self.r.randrange(7)
            if op == 0:
                del lines[i]
            elif op == 1:
                lines.insert(i, lines[i])
            elif op == 2:
                j = self.r.randrange(len(lines))
                lines[i], lines[j] = lines[j], lines[i]
            elif op == 3:
                lines[i] = lines[i][:self.r.randrange(len(lines[i]) + 1)]
            elif op == 4:
                cut = self.r.randrange(len(lines[i]) + 1)
                lines[i] = lines[i][:cut] + self.junk() + lines[i][cut:]
            elif op == 5:
                lines.insert(i, self.junk() + "\n")
            else:
                # a word of the line (often a number) replaced by a hostile one
                words = lines[i].split(" ")
                hostile_words = ("1e308", "-1", "NaN", "99999999999999999999999", "", "0", "x", "inf", "[N/A]")
                words[self.r.randrange(len(words))] = self.pick(hostile_words)
                lines[i] = " ".join(words)
        text = "".join(lines)
        if self.chance(10):
            text = text[:self.r.randrange(len(text) + 1)]
        return text

    def data(self, samples, max_lines=200):
        """text() as bytes, sometimes with raw bytes spliced in (invalid UTF-8, NUL, CR)."""
        if self.chance(20):
            return bytes(self.r.randrange(256) for _i in range(self.r.randrange(300)))
        data = self.text(samples, max_lines).encode("utf-8", "surrogatepass")
        if self.chance(2):
            at = self.r.randrange(len(data) + 1)
            data = data[:at] + bytes(self.r.randrange(256) for _i in range(self.r.randrange(1, 40))) + data[at:]
        return data

    def deep_json(self):
        """JSON text nested deeper than Python's recursion limit (json.loads raises RecursionError), as bytes."""
        depth = self.pick((1000, 5000, 100000))
        opener, closer = self.pick((("[", "]"), ('{"a":', "}")))
        return ('{"model_type": ' + opener * depth + "1" + closer * depth + "}").encode()

    # -- JSON documents
    def path(self, value):
        """A random path into a JSON value: a walk from the root that stops at a container or a leaf."""
        path = ()
        while isinstance(value, (dict, list)) and value and self.r.randrange(4):
            key = self.pick(sorted(value, key=str)) if isinstance(value, dict) else self.r.randrange(len(value))
            path += (key,)
            value = value[key]
        return path, value

    def json(self, samples, edits=4, leaves_only=False):
        """A real JSON document with a few values replaced by values of other types, deleted, or nested deep.

        leaves_only keeps every container and the type of every leaf (for documents a module of the collection wrote:
        their shape is fixed, their values come from the host)."""
        value = self.pick(samples)
        for _edit in range(self.r.randrange(1, edits + 1)):
            path, old = self.path(value)
            if leaves_only:
                if not isinstance(old, (dict, list)):
                    value = _replace(value, path, self.same_kind(old))
                continue
            op = self.r.randrange(10)
            if op == 0 and path:
                value = _delete(value, path)
            elif op == 1:
                deep = self.scalar()
                for _d in range(self.pick((2, 30, 200))):
                    deep = [deep]
                value = _replace(value, path, deep)
            else:
                value = _replace(value, path, self.value())
        if not leaves_only and self.chance(15):
            value = self.value(3)
        return value


def _replace(value, path, new):
    if not path:
        return new
    out = dict(value) if isinstance(value, dict) else list(value)
    out[path[0]] = _replace(value[path[0]], path[1:], new)
    return out


def _delete(value, path):
    container = value
    for key in path[:-1]:
        container = container[key]
    copy = dict(container) if isinstance(container, dict) else list(container)
    del copy[path[-1]]
    return _replace(value, path[:-1], copy)
