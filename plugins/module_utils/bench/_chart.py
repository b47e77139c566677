# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark chart: throughput and latency against concurrency as a standalone SVG (no dependency)."""

from __future__ import annotations

import math

from ansible_collections.llmops.sglang.plugins.module_utils.bench._gate import normalize_baseline


_COLORS = {"aggregate": "#0072B2", "baseline": "#7f7f7f", "per_request": "#009E73", "ttft_p50": "#D55E00",
           "ttft_p99": "#E69F00", "itl_p50": "#56B4E9", "itl_p99": "#CC79A7"}


def _esc(text):
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;"))


def _nice_max(value):
    if value <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(value))
    for step in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if value <= step * exp:
            return step * exp
    return 10 * exp


def _fmt_tick(value):
    return "%d" % round(value) if abs(value - round(value)) < 1e-9 else "%g" % value


def _fmt_num(value):
    return "%.0f" % value if value >= 100 else "%.3g" % value


class _Panel(object):
    """One chart: x = concurrency on a log2 scale, y linear or log10."""

    def __init__(self, x0, y0, w, h, levels, ymax=None, ymin=None, log_y=False):
        self.x0, self.y0, self.w, self.h = x0, y0, w, h
        self.levels = sorted(levels)
        self.log_y = log_y
        lo, hi = math.log2(self.levels[0]), math.log2(self.levels[-1])
        pad = 1.0 if hi == lo else 0.12 * (hi - lo)
        self.xlo, self.xhi = lo - pad, hi + pad
        self.ymin, self.ymax = ymin, ymax

    def x(self, c):
        return self.x0 + (math.log2(c) - self.xlo) / (self.xhi - self.xlo) * self.w

    def y(self, v):
        if self.log_y:
            lv = math.log10(max(v, self.ymin))
            return self.y0 + self.h - (lv - math.log10(self.ymin)) / (math.log10(self.ymax) - math.log10(self.ymin)) * self.h
        return self.y0 + self.h - (v / self.ymax) * self.h


def _frame(p, title, ylabel, yticks):
    out = ['<text x="%.1f" y="%.1f" class="title">%s</text>' % (p.x0, p.y0 - 14, _esc(title)),
           '<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" class="frame"/>' % (p.x0, p.y0, p.w, p.h)]
    for v in yticks:
        y = p.y(v)
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="grid"/>' % (p.x0, y, p.x0 + p.w, y))
        out.append('<text x="%.1f" y="%.1f" class="tick" text-anchor="end">%s</text>' % (p.x0 - 6, y + 4, _esc(_fmt_tick(v))))
    for c in p.levels:
        x = p.x(c)
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="grid"/>' % (x, p.y0, x, p.y0 + p.h))
        out.append('<text x="%.1f" y="%.1f" class="tick" text-anchor="middle">%d</text>' % (x, p.y0 + p.h + 16, c))
    out.append('<text x="%.1f" y="%.1f" class="axis" text-anchor="middle">concurrent requests</text>'
               % (p.x0 + p.w / 2, p.y0 + p.h + 34))
    out.append('<text x="%.1f" y="%.1f" class="axis" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>'
               % (p.x0 - 46, p.y0 + p.h / 2, p.x0 - 46, p.y0 + p.h / 2, _esc(ylabel)))
    return out


def _series(p, points, color, dashed=False, marker="circle", labels=False, label_above=True, line=True):
    pts = [(c, v) for c, v in points if v is not None and v > 0]
    if not pts:
        return []
    out = []
    if line and len(pts) > 1:
        path = " ".join("%s%.1f,%.1f" % ("M" if i == 0 else "L", p.x(c), p.y(v)) for i, (c, v) in enumerate(pts))
        out.append('<path d="%s" fill="none" stroke="%s" stroke-width="2.5"%s/>'
                   % (path, color, ' stroke-dasharray="6 4"' if dashed else ""))
    for c, v in pts:
        x, y = p.x(c), p.y(v)
        if marker == "diamond":
            out.append('<path d="M%.1f,%.1f l6,6 l-6,6 l-6,-6 z" fill="white" stroke="%s" stroke-width="2"/>' % (x, y - 6, color))
        else:
            out.append('<circle cx="%.1f" cy="%.1f" r="4.5" fill="%s" stroke="white" stroke-width="1.5"/>' % (x, y, color))
        if labels:
            # white halo: the label stays readable where it crosses a line
            out.append('<text x="%.1f" y="%.1f" class="value" text-anchor="middle" fill="%s" stroke="white" stroke-width="3" '
                       'paint-order="stroke">%s</text>' % (x, y - 10 if label_above else y + 20, color, _esc(_fmt_num(v))))
    return out


def _legend(x, y, items):
    """items: (label, color, style) with style False (line), True (dashed line), "diamond" or "ring"."""
    out = []
    for i, (label, color, style) in enumerate(items):
        yy = y + i * 18
        if style == "diamond":
            out.append('<path d="M%.1f,%.1f l6,6 l-6,6 l-6,-6 z" fill="white" stroke="%s" stroke-width="2"/>' % (x + 11, yy - 6, color))
        elif style == "ring":
            out.append('<circle cx="%.1f" cy="%.1f" r="7" fill="none" stroke="%s" stroke-width="2"/>' % (x + 11, yy, color))
        else:
            out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"%s/>'
                       % (x, yy, x + 22, yy, color, ' stroke-dasharray="6 4"' if style else ""))
        out.append('<text x="%.1f" y="%.1f" class="legend">%s</text>' % (x + 28, yy + 4, _esc(label)))
    return out


def _linear_ticks(vmax):
    step = vmax / 5.0
    return [step * i for i in range(6)]


def render_chart(levels, baseline=None, min_fraction=None, title="SGLang benchmark", subtitle=""):
    """Three panels (aggregate tok/s with the baseline, per-request tok/s, latency) as a standalone SVG string."""
    levels = [lv for lv in levels if isinstance(lv.get("concurrency"), int) and lv["concurrency"] >= 1]
    width, height = 1200, 490
    head = ['<?xml version="1.0" encoding="UTF-8"?>',
            '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Arial, '
            'sans-serif">' % (width, height, width, height),
            "<style>.title{font-size:15px;font-weight:bold;fill:#222}.tick{font-size:11px;fill:#444}.axis{font-size:12px;fill:#333}"
            ".legend{font-size:11.5px;fill:#333}.value{font-size:11px;font-weight:bold}.frame{fill:none;stroke:#999}"
            ".grid{stroke:#e3e3e3}.head{font-size:18px;font-weight:bold;fill:#111}.sub{font-size:12px;fill:#555}</style>",
            '<rect width="100%" height="100%" fill="white"/>',
            '<text x="20" y="28" class="head">%s</text>' % _esc(title),
            '<text x="20" y="48" class="sub">%s</text>' % _esc(subtitle)]
    if not levels:
        return "\n".join(head + ['<text x="20" y="90" class="axis">no measured level</text>', "</svg>"]) + "\n"
    cs = sorted(set(lv["concurrency"] for lv in levels))
    base = normalize_baseline(baseline) if baseline else {}
    by_c = dict((lv["concurrency"], lv) for lv in levels)
    body = []

    # 1. aggregate output tok/s, baseline and the gate threshold
    agg = [(c, by_c[c].get("aggregate_output_tok_s")) for c in cs]
    base_pts = [(c, base[c]) for c in cs if c in base]
    top = _nice_max(max([v or 0 for _c, v in agg] + [v for _c, v in base_pts] + [1]) * 1.15)
    p1 = _Panel(80, 100, 290, 270, cs, ymax=top)
    body += _frame(p1, "Aggregate output throughput", "output tokens/s (all requests)", _linear_ticks(top))
    if base_pts and min_fraction:
        for c, v in base_pts:
            x, y = p1.x(c), p1.y(v * min_fraction)
            body.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#b00" stroke-width="2"/>' % (x - 14, y, x + 14, y))
    # markers only: a baseline holds at its own levels, a line would invent values between them
    body += _series(p1, base_pts, _COLORS["baseline"], marker="diamond", line=False)
    body += _series(p1, agg, _COLORS["aggregate"], labels=True)
    below = [(c, v) for c, v in agg if c in base and min_fraction and v is not None and v < base[c] * min_fraction]
    for c, v in below:
        body.append('<circle cx="%.1f" cy="%.1f" r="8" fill="none" stroke="#b00" stroke-width="2"/>' % (p1.x(c), p1.y(max(v, 0))))
    legend = [("measured", _COLORS["aggregate"], False)]
    if base_pts:
        legend.append(("baseline", _COLORS["baseline"], "diamond"))
        if min_fraction:
            legend.append(("gate: %.0f%% of baseline" % (min_fraction * 100), "#b00", False))
    if below:
        legend = legend[:1] + [("below the gate", "#b00", "ring")] + legend[1:]
    body += _legend(p1.x0 + 8, p1.y0 + p1.h + 56, legend)

    # 2. per-request decode rate
    per = [(c, (by_c[c].get("per_request_output_tok_s") or {}).get("mean")) for c in cs]
    top2 = _nice_max(max([v or 0 for _c, v in per] + [1]) * 1.15)
    p2 = _Panel(480, 100, 290, 270, cs, ymax=top2)
    body += _frame(p2, "Per-request output rate", "output tokens/s per request", _linear_ticks(top2))
    body += _series(p2, per, _COLORS["per_request"], labels=True)
    body += _legend(p2.x0 + 8, p2.y0 + p2.h + 56, [("mean decode rate after the first token", _COLORS["per_request"], False)])

    # 3. latency percentiles, log scale (TTFT and ITL differ by orders of magnitude)
    series = [("TTFT p50", "ttft_ms", "p50", "ttft_p50", False), ("TTFT p99", "ttft_ms", "p99", "ttft_p99", True),
              ("ITL p50", "itl_ms", "p50", "itl_p50", False), ("ITL p99", "itl_ms", "p99", "itl_p99", True)]
    vals = [v for _l, key, q, _c, _d in series for c in cs for v in [(by_c[c].get(key) or {}).get(q)] if v]
    lo = 10 ** math.floor(math.log10(min(vals))) if vals else 1.0
    hi = 10 ** math.ceil(math.log10(max(vals) * 1.05)) if vals else 1000.0
    if hi <= lo:
        hi = lo * 10
    p3 = _Panel(880, 100, 290, 270, cs, ymin=lo, ymax=hi, log_y=True)
    ticks = []
    t = lo
    while t <= hi * 1.0001:
        ticks.append(t)
        t *= 10
    body += _frame(p3, "Latency", "milliseconds (log scale)", ticks)
    legend3 = []
    for label, key, q, color, dashed in series:
        pts = [(c, (by_c[c].get(key) or {}).get(q)) for c in cs]
        body += _series(p3, pts, _COLORS[color], dashed=dashed)
        legend3.append((label, _COLORS[color], dashed))
    body += _legend(p3.x0 + 8, p3.y0 + p3.h + 56, legend3[:2])
    body += _legend(p3.x0 + 150, p3.y0 + p3.h + 56, legend3[2:])
    return "\n".join(head + body + ["</svg>"]) + "\n"
