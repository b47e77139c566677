# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bytes to the few lines worth parsing: streaming line splitting and the literal-search plan.

The input is read as bytes in chunks and split into lines here, so memory stays constant: a line
longer than ``max_line_bytes`` keeps its head and the rest is only counted.

Most lines of a long-running server are decode/prefill/HTTP lines that matter to nobody. The scan
therefore never looks at every line: each interesting line must contain one of a set of plain
literals. For every literal the scanner picks its rarest byte (from a byte-frequency sample of the
input), finds that byte with ``bytes.find`` (memchr) and probes the literal around it with
``startswith``; literals made of common bytes only are searched whole. Lines holding ANSI codes are
checked again with the codes removed.
"""

from __future__ import annotations

import re

from ansible_collections.llmops.sglang.plugins.module_utils._sglang_log_records import ANSI_PATTERN

DEFAULT_MAX_LINE_BYTES = 256 * 1024
# Occurrences per MiB of a literal's rarest byte above which the literal is searched whole: a probe
# (memchr, then startswith) costs about 0.2 us, a whole-literal search about 0.5 ms per MiB.
PROBE_LIMIT_PER_MIB = 2500
# Re-sample byte frequencies after this many bytes (sooner when the plan searches many literals
# whole, as after a startup burst), on blocks at least PLAN_MIN_BYTES long.
REPLAN_BYTES = 16 << 20
REPLAN_EXPENSIVE_BYTES = 2 << 20
PLAN_MIN_BYTES = 64 << 10
# A plan with more whole-literal searches than this counts as expensive (re-sampled sooner).
CHEAP_FIND_LITERALS = 2

_ANSI_BYTES_RE = re.compile(ANSI_PATTERN.encode("ascii"))


def minimal_alternatives(alternatives):
    """Drop alternatives (lists of runs a line must all contain) implied by a kept single literal."""
    singles = []
    for runs in sorted((a for a in alternatives if len(a) == 1), key=lambda a: len(a[0])):
        if not any(k in runs[0] for k in singles):
            singles.append(runs[0])
    kept = [[lit] for lit in singles]
    for runs in alternatives:
        if len(runs) > 1 and not any(k in r for r in runs for k in singles) and runs not in kept:
            kept.append(runs)
    return kept


class LineScanner(object):
    """Splits fed bytes into lines and hands the interesting ones to ``on_line(raw bytes, loc)``.

    ``alternatives`` lists what a line must hold to be interesting (each entry: runs of text, one of
    which must be there); None parses every line. ``loc`` is the 1-based line number, or the input
    offset of the line when ``count_lines`` is false. The consumer sets ``sequential`` (parse every
    line while true, e.g. inside a traceback) and ``follow`` (parse this many next lines); ``on_line``
    returns False for a line that does not count towards ``follow``.
    """

    def __init__(self, on_line, alternatives, max_line_bytes=DEFAULT_MAX_LINE_BYTES, count_lines=True):
        self._on_line = on_line
        self._max_line = max_line_bytes
        self._counting = count_lines
        self._scan_all = alternatives is None
        # each entry: the runs (bytes) one of which a line must hold for this alternative to match
        self.alternatives = [] if alternatives is None else [
            [r.encode("utf-8") for r in runs] for runs in minimal_alternatives(alternatives)]
        self.groups = None          # byte -> literals selected by that byte
        self.find_literals = []     # literals searched whole
        self._plan_size = 0
        self._since_plan = 0
        self.sequential = False
        self.follow = 0
        self.offset = 0             # input offset of the next byte fed
        self._pending = b""         # unterminated line carried to the next chunk
        self._pending_at = 0
        self._skipping = False      # inside the dropped tail of an over-long line
        self._lineno = 1            # line of the next byte (only when counting while scanning)
        self.inspected = 0
        self.truncated = 0
        self.dropped = 0

    # -- streaming -----------------------------------------------------------------------------

    def feed(self, data):
        """Scan the next piece of the input (bytes of any size; lines may span calls)."""
        if not data:
            return
        base = self.offset
        self.offset += len(data)
        if self._skipping:
            nl = data.find(b"\n")
            if nl < 0:
                self.dropped += len(data)
                return
            self.dropped += nl
            self._skipping = False
            self._lineno += 1
            data = data[nl + 1:]
            base += nl + 1
            if not data:
                return
        last = data.rfind(b"\n")
        if last < 0:
            if not self._pending:
                self._pending_at = base
            self._hold(self._pending + data)
            return
        start = 0
        if self._pending:
            # the line carried over from the previous chunk ends here: scan it alone, then the chunk in place
            start = data.find(b"\n") + 1
            line = self._pending + data[:start]
            self._pending = b""
            self._scan(line, 0, len(line), self._pending_at)
        if start <= last:
            self._scan(data, start, last + 1, base)
        self._pending_at = base + last + 1
        self._hold(data[last + 1:])

    def _hold(self, rest):
        """Keep an unterminated line for the next chunk; past max_line_bytes scan its head and drop the rest."""
        if len(rest) <= self._max_line:
            self._pending = rest
            return
        self._scan(rest, 0, self._max_line, self._pending_at)
        self.truncated += 1
        self.dropped += len(rest) - self._max_line
        self._skipping = True
        self._pending = b""

    def finish(self):
        """End of input: scan the unterminated last line."""
        if self._pending:
            self._scan(self._pending, 0, len(self._pending), self._pending_at)
            self._pending = b""

    # -- the plan --------------------------------------------------------------------------------

    def plan(self, block, start, end):
        """Choose, per alternative, the rarest byte to look for (from a sample of this block)."""
        size = end - start
        step = max(size // 4, 1)
        sample = b"".join(block[p:p + 8192] for p in range(start, end, step))
        scale = float(1 << 20) / max(len(sample), 1)
        freq = {}

        def rate(byte):
            # occurrences per MiB: each costs one probe
            if byte not in freq:
                freq[byte] = sample.count(bytes((byte,))) * scale
            return freq[byte]

        groups, finds = {}, []
        for runs in self.alternatives:
            # any run of the alternative will do: take the one holding the rarest byte
            byte, lit = min(((min(set(r), key=rate), r) for r in runs), key=lambda bl: rate(bl[0]))
            if rate(byte) > PROBE_LIMIT_PER_MIB:
                finds.append(runs[0])  # searched whole: the longest run skips fastest
                continue
            offsets = tuple(i for i, b in enumerate(lit) if b == byte)
            groups.setdefault(bytes((byte,)), []).append((lit, offsets))
        self.groups = groups
        self.find_literals = finds
        self._plan_size = size
        self._since_plan = 0

    def candidates(self, block, start, end):
        """Offsets of line starts in [start, end) whose line head (max_line_bytes) holds a literal."""
        found = set()
        rfind, find, startswith, cap = block.rfind, block.find, block.startswith, self._max_line
        for needle, entries in self.groups.items():
            pos = find(needle, start, end)
            while pos >= 0:
                hit = -1
                for lit, offsets in entries:
                    for k in offsets:
                        if pos - k >= start and startswith(lit, pos - k, end):
                            hit = pos - k
                            break
                    if hit >= 0:
                        break
                if hit < 0:
                    pos = find(needle, pos + 1, end)
                    continue
                s = rfind(b"\n", start, hit) + 1
                if s < start:
                    s = start
                if hit + len(lit) - s > cap:
                    # past the head of an over-long line; another literal may still fit
                    pos = find(needle, pos + 1, end)
                    continue
                found.add(s)
                e = find(b"\n", pos, end)
                if e < 0:
                    break
                pos = find(needle, e, end)
        for lit in self.find_literals:
            pos = find(lit, start, end)
            while pos >= 0:
                s = rfind(b"\n", start, pos) + 1
                if s < start:
                    s = start
                if pos + len(lit) - s <= cap:
                    found.add(s)
                e = find(b"\n", pos, end)
                if e < 0:
                    break
                pos = find(lit, e, end)
        # a colour code may split a literal: check such lines again without the codes
        pos = find(b"\x1b", start, end)
        while pos >= 0:
            s = rfind(b"\n", start, pos) + 1
            if s < start:
                s = start
            e = find(b"\n", pos, end)
            if e < 0:
                e = end
            if s not in found and pos - s < cap:
                clean = _ANSI_BYTES_RE.sub(b"", block[s:min(e, s + cap)])
                if any(r in clean for runs in self.alternatives for r in runs):
                    found.add(s)
            pos = find(b"\x1b", e, end)
        return sorted(found)

    # -- block scan ----------------------------------------------------------------------------

    def _scan(self, block, start, end, base):
        """Hand the interesting lines of block[start:end] on; block[0] is at input offset base."""
        size = end - start
        if not self._scan_all and (self.groups is None or (size >= PLAN_MIN_BYTES and (
                self._plan_size < PLAN_MIN_BYTES or self._since_plan >= REPLAN_BYTES
                or (len(self.find_literals) > CHEAP_FIND_LITERALS and self._since_plan >= REPLAN_EXPENSIVE_BYTES)))):
            self.plan(block, start, end)
        self._since_plan += size
        starts = None if self._scan_all else self.candidates(block, start, end)
        find, count, cap, on_line = block.find, block.count, self._max_line, self._on_line
        counting = self._counting
        lineno, counted = self._lineno, start
        pos, idx = start, 0
        while pos < end:
            if starts is not None and not self.sequential and not self.follow:
                # nothing pending: jump to the next candidate line
                while idx < len(starts) and starts[idx] < pos:
                    idx += 1
                if idx >= len(starts):
                    break
                pos = starts[idx]
                idx += 1
                took = False
            elif self.follow:
                self.follow -= 1
                took = True
            else:
                took = False
            e = find(b"\n", pos, end)
            if e < 0:
                e = end
            if counting:
                lineno += count(b"\n", counted, pos)
                counted = pos
                loc = lineno
            else:
                loc = base + pos
            if e - pos > cap:
                self.truncated += 1
                self.dropped += e - pos - cap
                raw = block[pos:pos + cap]
            else:
                raw = block[pos:e]
            self.inspected += 1
            if on_line(raw, loc) is False and took:
                self.follow += 1    # the line was not the consumer's to count
            pos = e + 1
        if counting:
            self._lineno = lineno + count(b"\n", counted, end)
