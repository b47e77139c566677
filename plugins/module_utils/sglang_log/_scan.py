# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bytes to the few lines worth parsing: streaming line splitting and the literal-search plan.

The input is read as bytes in chunks and split into lines here, so memory stays constant: a line
longer than ``max_line_bytes`` keeps its head and the rest is only counted.

Most lines of a long-running server are decode/prefill/HTTP lines that matter to nobody. The scan
therefore never looks at every line: each interesting line must contain one of a set of plain
literals, and only the lines holding one are cut out, decoded and parsed. A byte-frequency sample of
the input decides how each literal is found:

- a literal with a rare byte: that byte is found with ``bytes.find`` (memchr, many GB/s) and the line
  holding it searched for the literals it serves, once per line; a rare byte several literals share
  serves them in one pass;
- the literals made of common bytes only (``Error``, ``Traceback (most recent call last)`` in a log
  full of ``EPn`` prefixes and ``GET`` lines): whole searches in C, chosen by cost: a 4-byte piece
  several of them share (``rror``), a literal itself (``bytes.find``, faster the longer it is), or one
  regular expression per byte they share (the byte with a lookahead of their rests, each checked back
  to its start), whose C loop takes the many hits of a common byte.

Lines holding ANSI codes are checked again with the codes removed. The plan is made again soon after
one unlike the last (its sample may have been a startup burst), then ever less often, and as soon as
its probes are well over what its sample promised.
"""

from __future__ import annotations

import re

from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._records import ANSI_PATTERN

DEFAULT_MAX_LINE_BYTES = 256 * 1024
# Costs, in probes per MiB (one probe: memchr to the next line holding a byte, then a search of that line for the
# literals it serves, about 1 us of Python). A literal whose rarest byte is in more lines than this is found by a
# whole search instead.
PROBE_LIMIT_PER_MIB = 300
# A memchr pass over a MiB that is in the CPU cache.
MEMCHR_PASS_COST = 25
# A bytes.find pass over a MiB: a base and a part that shrinks with the length of the needle.
FIND_PASS_COST = 200
FIND_BYTE_COST = 2400
# A regular-expression pass over a MiB (its C loop over the bytes) and each hit of its first byte.
REGEX_PASS_COST = 700
REGEX_HIT_COST = 0.03
# Plan again PLAN_CHECK_BYTES after a plan whose cost differs by more than PLAN_CHANGE from the last one's
# (a sample of a startup burst), then after twice as many bytes each time up to REPLAN_BYTES; and as soon as
# the probes made exceed PROBE_SLACK times what the plan expected (plus PROBE_SLACK_PER_MIB). Only on blocks
# at least PLAN_MIN_BYTES long.
REPLAN_BYTES = 64 << 20
PLAN_CHECK_BYTES = 1 << 20
PLAN_CHANGE = 0.1
PROBE_SLACK = 3
PROBE_SLACK_PER_MIB = 200
PLAN_MIN_BYTES = 64 << 10
# The sample is four pieces of this size, spread over the block.
SAMPLE_BYTES = 4096

_ANSI_BYTES_RE = re.compile(ANSI_PATTERN.encode("ascii"))


def _cover(options, count):
    """Choose keys until all count alternatives are served; options maps a key to [cost, indexes it serves].

    Greedy by saving: first the key that costs the least against serving each of its alternatives by the
    cheapest key of its own. Returns [(key, indexes it serves that no key before it serves)].
    """
    alone = [min(cost for cost, served in options.values() if n in served) for n in range(count)]
    left, chosen = set(range(count)), []
    keys = sorted(options)

    def saving(key):
        cost, served = options[key]
        served = served & left
        return (sum(alone[n] for n in served) - cost, len(served)) if served else (float("-inf"), 0)

    while left:
        key = max(keys, key=saving)
        served = sorted(options[key][1] & left)
        left.difference_update(served)
        chosen.append((key, served))
    return chosen


def _find(needle):
    """search(block, pos, end): the offset of needle in block[pos:end], or -1."""
    def search(block, pos, end):
        return block.find(needle, pos, end)
    return search


def _search(regex):
    """search(block, pos, end): the offset of the first match of regex in block[pos:end], or -1."""
    def search(block, pos, end):
        m = regex.search(block, pos, end)
        return -1 if m is None else m.start()
    return search


def _holds_rest(find, rest, start, end):
    """Whether block[start:end] (find is the block's) holds all runs of one of rest (tuples of runs)."""
    return any(all(find(r, start, end) >= 0 for r in runs) for runs in rest)


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

    ``alternatives`` lists what a line must hold to be interesting (each entry: runs of text, all of
    which must be in the line's head); None parses every line. ``loc`` is the 1-based line number, or the input
    offset of the line when ``count_lines`` is false. The consumer sets ``sequential`` (parse every
    line while true, e.g. inside a traceback) and ``follow`` (parse this many next lines); ``on_line``
    returns False for a line that does not count towards ``follow``. While ``on_line`` runs, ``candidate`` says
    whether the line holds every run of an alternative (always true when every line is parsed).
    """

    def __init__(self, on_line, alternatives, max_line_bytes=DEFAULT_MAX_LINE_BYTES, count_lines=True):
        self._on_line = on_line
        self._max_line = max_line_bytes
        self._counting = count_lines
        self._scan_all = alternatives is None
        # each entry: the runs (bytes) a line must all hold for this alternative to match
        self.alternatives = [] if alternatives is None else [
            [r.encode("utf-8") for r in runs] for runs in minimal_alternatives(alternatives)]
        self._alt_bytes = [set(r[k:k + 1] for r in runs for k in range(len(r))) for runs in self.alternatives]
        # a line must hold every run of an alternative: whichever run the plan searches, the others are checked in its
        # line, so the lines handed on never depend on the plan (run -> the other runs, for each alternative holding it)
        self._rest = {}
        for runs in self.alternatives:
            for r in runs:
                self._rest.setdefault(r, []).append(tuple(o for o in runs if o != r))
        for r, rest in self._rest.items():
            if () in rest:
                self._rest[r] = None    # the run alone is enough
        self._bytes = set().union(*self._alt_bytes) if self._alt_bytes else set()
        self._byte_of = dict((b[0], b) for b in self._bytes)
        self._rates = None          # (lines per MiB, occurrences per MiB) of each byte, as the last plan saw them
        # byte -> [(literal, None or the other runs its alternative needs)], searched for in each line holding the byte
        self.groups = None
        # whole searches: (needle, or the byte of a regex; search(block, pos, end) -> offset or -1;
        # [(literal, offset of the hit in it)])
        self.searches = []
        self.find_literals = []     # literals found by those searches
        self._plan_size = 0
        self._since_plan = 0
        self._expected = 0.0        # probes per MiB the plan expects
        self._cost = 0.0            # what its passes cost per MiB, in probes
        self._check_after = PLAN_CHECK_BYTES
        self._probes = 0            # probes made since the plan
        self.sequential = False
        self.follow = 0
        # whether the line handed on holds a key literal (False: handed on only for a traceback or a follow window)
        self.candidate = True
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
        """Choose how to find each alternative, from a sample of this block."""
        size = end - start
        step = max(size // 4, 1)
        sample = b"".join(block[p:p + SAMPLE_BYTES] for p in range(start, end, step))
        scale = float(1 << 20) / max(len(sample), 1)
        rates = dict((byte, sample.count(byte) * scale) for byte in self._bytes)   # occurrences per MiB
        # a rare byte is probed once per line that holds it: lines per MiB
        in_lines = dict.fromkeys(self._byte_of, 0)
        for line in sample.split(b"\n"):
            for b in in_lines.keys() & set(line):
                in_lines[b] += 1
        line_rates = dict((self._byte_of[b], n * scale) for b, n in in_lines.items())
        if self._rates is not None:
            # a sample of 16 KiB sees a few lines of each kind: averaged with the last plan's, plans stop flapping
            line_rates = dict((b, (r + self._rates[0][b]) / 2) for b, r in line_rates.items())
            rates = dict((b, (r + self._rates[1][b]) / 2) for b, r in rates.items())
        self._rates = (line_rates, rates)
        probed, common = [], []
        for n, alt_bytes in enumerate(self._alt_bytes):
            (probed if any(line_rates[b] <= PROBE_LIMIT_PER_MIB for b in alt_bytes) else common).append(n)
        # a literal with a rare byte: searched for in the lines holding a rare byte it shares with as many others as pays
        options = {}
        for i, n in enumerate(probed):
            for byte in self._alt_bytes[n]:
                if line_rates[byte] <= PROBE_LIMIT_PER_MIB:
                    options.setdefault(byte, [MEMCHR_PASS_COST + line_rates[byte], set()])[1].add(i)
        groups, probes, cost = {}, 0.0, 0.0
        for byte, served in _cover(options, len(probed)):
            probes += line_rates[byte]
            cost += options[byte][0]
            for i in served:
                lit = max((r for r in self.alternatives[probed[i]] if byte in r), key=len)
                groups.setdefault(byte, []).append((lit, self._rest[lit]))
        # literals of common bytes only: whole searches, each a literal, a 4-byte piece several share (each hit
        # probed) or a regular expression of a byte several share
        options = {}
        for i, n in enumerate(common):
            for r in self.alternatives[n]:
                options.setdefault(r, [FIND_PASS_COST + FIND_BYTE_COST / len(r) + sample.count(r) * scale, set()])[1].add(i)
                for piece in set(r[k:k + 4] for k in range(len(r) - 3)):
                    options.setdefault(piece, [None, set()])[1].add(i)
            for byte in self._alt_bytes[n]:
                options.setdefault(byte, [REGEX_PASS_COST + rates[byte] * REGEX_HIT_COST, set()])[1].add(i)
        for key in list(options):
            if options[key][0] is None:
                if len(options[key][1]) < 2:
                    del options[key]    # its whole literal is found faster
                else:
                    options[key][0] = FIND_PASS_COST + FIND_BYTE_COST / 4.0 + sample.count(key) * scale
        searches, finds = [], []
        for key, served in _cover(options, len(common)):
            cost += options[key][0]
            entries = []
            for i in served:
                lit = max((r for r in self.alternatives[common[i]] if key in r), key=len)
                entries.append((lit, lit.index(key)))   # the first one: the longest rest to look ahead for
                finds.append(lit)
            if len(key) > 1:
                searches.append((key, _find(key), entries))
                probes += sample.count(key) * scale
            else:
                # the byte, then the rest of a literal and a look back over all of it: a match is a literal
                rests = sorted(set(re.escape(lit[k + 1:]) + (b"(?<=%s)" % re.escape(lit) if k else b"") for lit, k in entries))
                searches.append((key, _search(re.compile(re.escape(key) + b"(?=" + b"|".join(rests) + b")")), entries))
        # a plan much unlike the last one may come from an unusual block (a startup): check it again soon
        steady = self.groups is not None and abs(cost - self._cost) <= PLAN_CHANGE * self._cost
        self._check_after = min(2 * self._check_after, REPLAN_BYTES) if steady else PLAN_CHECK_BYTES
        self.groups = groups
        self.searches = searches
        self.find_literals = finds
        self._expected = probes
        self._cost = cost
        self._plan_size = size
        self._since_plan = 0
        self._probes = 0

    def candidates(self, block, start, end):
        """Offsets of line starts in [start, end) whose line head (max_line_bytes) holds every run of an alternative.

        A hit of a rare byte is taken line by line: the line's head is searched once for each literal that byte
        serves, then the search goes on after the line, so a line full of the byte (a server_args dump, a
        traceback frame) costs one probe, and a line already found costs no search.
        """
        found = set()
        rfind, find, cap = block.rfind, block.find, self._max_line
        probes = 0
        startswith = block.startswith
        for needle, entries in self.groups.items():
            pos = find(needle, start, end)
            while pos >= 0:
                probes += 1
                s = rfind(b"\n", start, pos) + 1
                if s < start:
                    s = start
                e = find(b"\n", pos, end)
                if e < 0:
                    e = end
                if s not in found:
                    # one copy of the line's head, then `in` tests: cheaper than a find call per literal
                    line = block[s:e] if e - s <= cap else block[s:s + cap]
                    for lit, rest in entries:
                        if lit in line and (rest is None or any(all(r in line for r in runs) for runs in rest)):
                            found.add(s)
                            break
                pos = find(needle, e, end)
        for dummy, search, entries in self.searches:
            pos = search(block, start, end)
            while pos >= 0:
                probes += 1
                s = rfind(b"\n", start, pos) + 1
                if s < start:
                    s = start
                for lit, k in entries:
                    at = pos - k
                    if at >= start and startswith(lit, at, end) and at + len(lit) - s <= cap:
                        e = find(b"\n", pos, end)
                        if e < 0:
                            e = end
                        rest = self._rest[lit]
                        if rest is None or s in found or _holds_rest(find, rest, s, min(e, s + cap)):
                            found.add(s)
                            pos = e
                            break
                pos = search(block, pos + 1, end)
        self._probes += probes
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
                if any(all(r in clean for r in runs) for runs in self.alternatives):
                    found.add(s)
            pos = find(b"\x1b", e, end)
        return sorted(found)

    def _stale(self):
        """The plan is due for a check, or its probes are far over what its sample promised."""
        if self._since_plan >= self._check_after:
            return True
        mib = self._since_plan / float(1 << 20)
        return self._since_plan >= PLAN_CHECK_BYTES and self._probes > (PROBE_SLACK * self._expected + PROBE_SLACK_PER_MIB) * mib

    # -- block scan ----------------------------------------------------------------------------

    def _scan(self, block, start, end, base):
        """Hand the interesting lines of block[start:end] on; block[0] is at input offset base."""
        size = end - start
        if not self._scan_all and (self.groups is None or (size >= PLAN_MIN_BYTES and (
                self._plan_size < PLAN_MIN_BYTES or self._stale()))):
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
                self.candidate = True
            else:
                if self.follow:
                    self.follow -= 1
                    took = True
                else:
                    took = False
                if starts is not None:
                    while idx < len(starts) and starts[idx] < pos:
                        idx += 1
                    self.candidate = idx < len(starts) and starts[idx] == pos
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
