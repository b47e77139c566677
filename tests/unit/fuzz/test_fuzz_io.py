# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Readers of what another party controls, on the shapes that once made them block or loop: HTTP answers with
mutated framing, some trickled a byte at a time (one deadline per request); checkpoint directories whose files are
FIFOs, sockets, devices or directories (nothing blocks); libraries whose section table names fatbin regions again and
again (work bounded by the file's size). Each returns, or raises its own documented error with a message, in bounded
time or work; nothing else escapes."""

import contextlib
import json
import os
import shutil
import struct
import time

from ansible_collections.llmops.sglang.plugins.module_utils.bench import _client as bclient
from ansible_collections.llmops.sglang.plugins.module_utils import _checkpoint as ck
from ansible_collections.llmops.sglang.plugins.module_utils import _fatbin as fb
from ansible_collections.llmops.sglang.plugins.module_utils import _files
from ansible_collections.llmops.sglang.plugins.module_utils import _http

from bench_servers import Trickle  # tests/unit/bench_servers.py
from crafted_elf import ELF_SECTION, repeat_fatbin  # tests/unit/crafted_elf.py
from odd_files import KINDS, make_odd, within  # tests/unit/odd_files.py

from .corpus import CONFIGS, FIXTURES, INDEXES, QUANT, SAFETENSORS, SERVER_INFO, SSE
from .harness import clean, fuzz


# ---- HTTP: framing, trickled ----------------------------------------------------------------------

TIMEOUT = 0.25
# Three requests a case, each ending by its deadline; the rest is a loaded machine's scheduling.
CASE_SECONDS = 3 * TIMEOUT + 2.0
STATUS = (b"HTTP/1.1 200 OK", b"HTTP/1.0 200 OK", b"HTTP/1.1 503 Service Unavailable", b"HTTP/1.1 401 Unauthorized",
          b"HTTP/1.1 200", b"HTTP/1.1 99999 X", b"HTTP/2 200", b"ICY 200 OK", b"HTTP/1.1 100 Continue", b"")


def _chunked(m, body):
    """body in chunked framing, chunk-size lines sometimes wrong (hex case, extensions, junk, huge, negative)."""
    out, at = [], 0
    while at < len(body):
        n = min(len(body) - at, m.r.randrange(1, 4096))
        size = m.pick((b"%x" % n, b"%X" % n, b"%x;ext=\"a\"" % n, b"  %x  " % n, b"%x" % n, b"%x" % n, b"-1",
                       b"f" * m.r.randrange(1, 40), b"0" * 70000 + b"1", m.junk().encode("utf-8", "surrogatepass")))
        out.append(size + b"\r\n" + body[at:at + n] + m.pick((b"\r\n", b"\r\n", b"\n", b"", b"xx")))
        at += n
    if m.r.randrange(4):
        out.append(b"0\r\n" + m.pick((b"", b"X-Trailer: 1\r\n")) + b"\r\n")
    return b"".join(out)


def _http_answer(m):
    """(head, tail, gap): a mutated HTTP answer, its tail trickled a byte every gap seconds in one case of eight."""
    if m.chance(2):
        body = m.data(SSE)
    else:
        body = json.dumps(m.json(SERVER_INFO)).encode()
    lines = [m.pick(STATUS) if m.r.randrange(6) else m.junk().encode("utf-8", "surrogatepass"),
             b"Content-Type: " + m.pick((b"text/event-stream", b"application/json", b""))]
    framing = m.r.randrange(4)
    if framing == 0:
        lines.append(b"Content-Length: %d" % m.pick((len(body), len(body), len(body) + m.r.randrange(1, 100),
                                                     max(0, len(body) - 5), 2 ** 63, -1)))
    elif framing == 1:
        lines.append(b"Transfer-Encoding: chunked")
        body = _chunked(m, body)
    elif framing == 2:
        lines.append(b"Connection: close")
    for _i in range(m.r.randrange(3)):
        lines.append(m.pick((b"X-Pad: ", b"", b" folded", b"Content-Length: ")) + m.junk().encode("utf-8", "surrogatepass"))
    eol = m.pick((b"\r\n", b"\r\n", b"\n"))
    raw = eol.join(lines) + eol + eol + body
    if m.chance(6):
        raw = raw[:m.r.randrange(len(raw) + 1)]
    cut = m.r.randrange(len(raw) + 1)
    if m.chance(8):
        return raw[:cut], raw[cut:] + b"x" * 400, 0.005  # a few seconds of bytes: only the deadline ends it
    return raw, b"", 0


def test_http_framing_and_trickle(request):
    """_http's request and event-stream reads and the benchmark's stream on mutated answers from a real loopback
    server, some trickled: FetchError (or an answer), each request ended by its one deadline."""
    server = Trickle(b"", b"", 0)

    def check(case):
        server.head, server.tail, server.gap = case
        start = time.monotonic()
        clean(lambda: _http.request(server.url, "/server_info", timeout=TIMEOUT), _http.FetchError)
        with contextlib.suppress(_http.FetchError):
            with _http.open_url(server.url, "/v1/chat/completions", "POST", {}, timeout=TIMEOUT,
                                accept="text/event-stream") as answer:
                for _line in answer.lines(4096, 1 << 20):
                    pass
        res = bclient.stream_chat(server.url, {"messages": []}, timeout=TIMEOUT)
        assert res["ok"] or res["error"]["kind"] in bclient.ERROR_KINDS, res["error"]
        took = time.monotonic() - start
        assert took < CASE_SECONDS, "three requests with a %ss timeout took %.2f s" % (TIMEOUT, took)

    try:
        fuzz(request, _http_answer, check, 400)
    finally:
        server.close()


# ---- checkpoint files that are not regular files ------------------------------------------------------

NAMES = ("config.json", "hf_quant_config.json", "model.safetensors.index.json", "model-00001-of-00004.safetensors")
SHAPES = KINDS + ("dir", "dangling", "missing", "regular", "regular")


def _checkpoint_dir(m):
    """What each checkpoint file is: a shape (FIFO, socket, /dev/zero, directory, dangling symlink, missing, regular)
    and, for a regular one, mutated real content."""
    contents = {"config.json": lambda: json.dumps(m.json(CONFIGS)).encode(),
                "hf_quant_config.json": lambda: json.dumps(m.json(QUANT)).encode(),
                "model.safetensors.index.json": lambda: json.dumps(m.json(INDEXES)).encode(),
                "model-00001-of-00004.safetensors": lambda: m.data(SAFETENSORS)}
    return [(name, m.pick(SHAPES), contents[name]()) for name in NAMES]


def test_checkpoint_odd_files(request, tmp_path):
    """inspect_checkpoint and read_regular on checkpoints whose files are FIFOs, sockets, devices, directories or
    mutated real files: CheckpointError (or a result), never a blocked open."""
    count = [0]
    sockets = []

    def check(case):
        count[0] += 1
        directory = tmp_path / ("c%d" % count[0])
        directory.mkdir()
        for name, shape, content in case:
            path = directory / name
            if shape in KINDS:
                sockets.append(make_odd(path, shape))
            elif shape == "dir":
                path.mkdir()
            elif shape == "dangling":
                os.symlink(str(directory / "nowhere"), str(path))
            elif shape == "regular":
                path.write_bytes(content)
        _info, error = within(10, ck.inspect_checkpoint, str(directory))
        assert error is None or (isinstance(error, ck.CheckpointError) and str(error).strip()), repr(error)
        for name, _shape, _content in case:
            _data, error = within(10, _files.read_regular, str(directory / name), 1 << 20)
            assert error is None or isinstance(error, (_files.NotRegularFile, OSError)), repr(error)
        for sock in sockets:
            if sock is not None:
                sock.close()
        del sockets[:]
        shutil.rmtree(str(directory))

    fuzz(request, _checkpoint_dir, check, 400)


# ---- fatbin regions named again and again -------------------------------------------------------------

FATBIN_LIBRARY = (FIXTURES / "fatbin" / "libfatbin_mix.so").read_bytes()


def _repeated_sections(m):
    """The real library with its .nv_fatbin region (plus zero padding) named by many section headers, some of them
    moved or resized to overlap the region in part, maybe with a few other bytes of the table overwritten."""
    data, _shift = repeat_fatbin(FATBIN_LIBRARY, m.pick((1, 2, 50, 1000, m.r.randrange(1, 20000))), m.pick((0, 64, 1 << 16)))
    data = bytearray(data)
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shnum = struct.unpack_from("<H", data, 0x3C)[0]
    fatbin = [i for i in range(shnum) if ELF_SECTION.unpack_from(data, shoff + i * 64)[4] >= len(FATBIN_LIBRARY)]
    for _i in range(m.r.randrange(4)):
        at = shoff + m.pick(fatbin) * 64
        offset, size = ELF_SECTION.unpack_from(data, at)[4:6]
        field = m.pick((24, 32))  # sh_offset or sh_size
        value = m.pick((offset + m.r.randrange(-64, 64), size + m.r.randrange(-64, 64), offset + size // 2, size // 2,
                        0, 2 ** 63, m.r.randrange(2 ** 64)))
        struct.pack_into("<Q", data, at + field, value % (1 << 64))
    return bytes(data)


def test_fatbin_repeated_sections(request, tmp_path, monkeypatch):
    """read_entries on libraries whose section table names the fatbin region up to 20,000 times, overlapping: entries
    or FatbinError, and the bytes walked never more than the file holds (counted)."""
    path = tmp_path / "libfuzz.so"
    walked = []
    walk = fb._walk

    def counted(view, start, end, entries):
        walked.append(end - start)
        return walk(view, start, end, entries)

    monkeypatch.setattr(fb, "_walk", counted)

    def check(data):
        path.write_bytes(data)
        del walked[:]
        found = clean(lambda: fb.read_entries(str(path)), fb.FatbinError)
        assert sum(walked) <= len(data), "walked %d bytes of a %d-byte file" % (sum(walked), len(data))
        if found:
            assert len(found[1]) <= fb.MAX_ENTRIES
    fuzz(request, _repeated_sections, check, 600)
