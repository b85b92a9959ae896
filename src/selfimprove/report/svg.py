"""Inline SVG charts for the run report page (report/page.py): a learning curve and a timeline.

Hand-built rather than drawn with matplotlib: the page must open anywhere with no extra
installed (matplotlib is an optional extra), the SVG stays a few kilobytes per chart, and the
text inside it is real text a browser can find and a test can read. Like the page, every value
reaches the markup through `markup.html` (formatted, capped, escaped), numbers included.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..ui import fmt_duration
from .markup import Html, html, join

TRAIN_COLOR = "#1f77b4"  # the arm's train reward per step
EVAL_COLOR = "#d95f02"  # its eval point with the 95% interval
SEED_COLORS = ("#1f77b4", "#6baed6", "#08519c", "#4292c6", "#2171b5")
SMOOTH_COLOR = "#0b2e59"  # the smoothed train reward, drawn over the faint raw line
EMA_ALPHA = 0.3  # smoothed[t] = 0.3 * mean reward of step t + 0.7 * smoothed[t-1]; the page states it
# one colour per arm on the overlay (iterations blues, controls warm), cycling past the last
ARM_COLORS = ("#1f77b4", "#4c9be8", "#08519c", "#6a51a3", "#9e9ac8", "#d95f02", "#e7298a", "#1b9e77", "#7570b3")


def ema(values: list[float], alpha: float = EMA_ALPHA) -> list[float]:
    """Exponential moving average, started at the first value (no warm-up bias to correct)."""
    out: list[float] = []
    for v in values:
        out.append(v if not out else alpha * v + (1 - alpha) * out[-1])
    return out


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round tick values covering [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(count - 1, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]


def _fmt(v: float) -> str:
    return f"{v:g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.1e}"


def _step_axes(left: float, top: float, plot_w: float, plot_h: float, height: float,
               x_range: tuple[float, float, float], y_range: tuple[float, float], *, x_ticks: int
               ) -> tuple[Callable[[float], float], Callable[[float], float], list[Html]]:
    """(px, py, the axes) of a chart over training steps: the scales from data to SVG coordinates, and
    what is drawn under the data (y grid and ticks, integer step ticks, the `training step` label, the
    frame). x_range is (lo, hi, pad): the ticks stay inside the pad kept around the data."""
    x_lo, x_hi, pad = x_range
    y_lo, y_hi = y_range

    def px(x: float) -> float:
        return left + (x - x_lo) / (x_hi - x_lo) * plot_w

    def py(y: float) -> float:
        return top + (1 - (y - y_lo) / (y_hi - y_lo)) * plot_h

    parts = []
    for t in _ticks(y_lo, y_hi):
        parts.append(html('<line x1="{}" x2="{}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                          '<text x="{}" y="{:.1f}" class="tick" text-anchor="end">{}</text>',
                          left, left + plot_w, left - 6, py(t) + 4, _fmt(t), y=py(t)))
    for t in _ticks(x_lo + pad, x_hi - pad, x_ticks):
        if float(t).is_integer():
            parts.append(html('<text x="{:.1f}" y="{}" class="tick" text-anchor="middle">{}</text>',
                              px(t), top + plot_h + 16, int(t)))
    parts.append(html('<text x="{}" y="{}" class="axis" text-anchor="middle">training step</text>'
                      '<rect x="{}" y="{}" width="{}" height="{}" class="frame"/>',
                      left + plot_w / 2, height - 4, left, top, plot_w, plot_h))
    return px, py, parts


def learning_curve(series: list[dict], evals: list[dict], *, title: str, width: int = 450, height: int = 220) -> Html:
    """An arm's train reward per step (one polyline per training seed) and its eval accuracy as a
    point with its 95% interval at the step it was evaluated.

    series: [{"label", "steps": [int], "rewards": [float]}]; evals: [{"label", "step", "acc", "ci": [lo, hi]}].
    """
    left, right, top, bottom = 48, 16, 28, 36
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [s for line in series for s in line["steps"]] + [e["step"] for e in evals if e.get("step") is not None]
    ys = [y for line in series for y in line["rewards"]]
    ys += [v for e in evals for v in (e["acc"], *(e.get("ci") or ()))]
    x_lo, x_hi = (min(xs), max(xs)) if xs else (0, 1)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    pad = (x_hi - x_lo) * 0.04  # the eval point sits on the last step: keep it off the frame
    x_lo, x_hi = x_lo - pad, x_hi + pad
    y_lo, y_hi = (min(ys + [0.0]), max(ys + [1.0])) if ys else (0.0, 1.0)

    px, py, axes = _step_axes(left, top, plot_w, plot_h, height, (x_lo, x_hi, pad), (y_lo, y_hi), x_ticks=6)
    parts = [html('<svg class="chart" role="img" viewBox="0 0 {w} {h}" width="{w}" height="{h}"><title>{t}</title>'
                  '<text x="{x}" y="16" class="chart-title">{t}</text>', w=width, h=height, t=title, x=left), *axes]
    for i, line in enumerate(series):
        color = SEED_COLORS[i % len(SEED_COLORS)]
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(line["steps"], line["rewards"]))
        if len(line["steps"]) == 1:
            parts.append(html('<circle cx="{:.1f}" cy="{:.1f}" r="2.5" fill="{}"/>',
                              px(line["steps"][0]), py(line["rewards"][0]), color))
        elif pts:
            parts.append(html('<polyline points="{}" fill="none" stroke="{}" stroke-width="1.2" stroke-opacity="0.45" '
                              'class="train-line"><title>{}</title></polyline>', pts, color, line["label"]))
            smooth = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(line["steps"], ema(line["rewards"])))
            parts.append(html('<polyline points="{}" fill="none" stroke="{}" stroke-width="2.2" class="smooth-line">'
                              '<title>{} (EMA, alpha {})</title></polyline>', smooth, SMOOTH_COLOR, line["label"],
                              EMA_ALPHA))
    for e in evals:
        if e.get("step") is None:
            continue
        x, (lo, hi) = px(e["step"]), (e.get("ci") or (e["acc"], e["acc"]))
        parts.append(html('<line x1="{x:.1f}" x2="{x:.1f}" y1="{:.1f}" y2="{:.1f}" stroke="{c}" stroke-width="2"/>'
                          '<circle cx="{x:.1f}" cy="{:.1f}" r="4.5" fill="{c}" class="eval-point"><title>{}</title></circle>',
                          py(lo), py(hi), py(e["acc"]), e["label"], x=x, c=EVAL_COLOR))
    lx = left + 8
    parts.append(html('<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-width="2"/>'
                      '<text x="{}" y="{}" class="legend">train reward per step; dark: EMA</text>'
                      '<circle cx="{}" cy="{}" r="4" fill="{}"/>'
                      '<text x="{}" y="{}" class="legend">eval accuracy, 95% interval</text>',
                      lx, lx + 18, top + 12, top + 12, TRAIN_COLOR, lx + 22, top + 16, lx + 9, top + 28, EVAL_COLOR,
                      lx + 22, top + 32))
    parts.append(Html("</svg>"))
    return join(parts)


def eval_overlay(arms: list[dict], base: dict | None, *, width: int = 720, height: int = 300) -> Html:
    """Every arm's eval accuracy over training steps on one chart: each arm a line from where it started
    (the base model's eval, or iter_0's final eval for an arm resumed from it) through its own evals,
    each eval a point with its 95% interval; the base model's eval a black square.

    arms: [{"arm", "color", "start": point or None, "points": [point]}]; point: {"step", "acc", "ci": [lo, hi]
    or None, "n"}. The legend is the page's (HTML text stays readable on a phone; SVG text shrinks with it)."""
    left, right, top, bottom = 48, 16, 16, 36
    plot_w, plot_h = width - left - right, height - top - bottom
    every = [p for a in arms for p in a["points"]] + ([base] if base else [])
    if not every:
        return Html()
    xs = [p["step"] for p in every]
    ys = [v for p in every for v in (p["acc"], *(p.get("ci") or ()))]
    x_lo, x_hi = min(xs), max(xs)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    pad = (x_hi - x_lo) * 0.04
    x_lo, x_hi = x_lo - pad, x_hi + pad
    y_lo, y_hi = max(0.0, min(ys) - 0.05), min(1.0, max(ys) + 0.05)
    if y_hi <= y_lo:
        y_lo, y_hi = 0.0, 1.0

    px, py, axes = _step_axes(left, top, plot_w, plot_h, height, (x_lo, x_hi, pad), (y_lo, y_hi), x_ticks=8)
    parts = [html('<svg class="chart overlay" role="img" viewBox="0 0 {w} {h}" width="{w}" height="{h}">'
                  '<title>eval accuracy of every arm over training steps</title>', w=width, h=height), *axes]
    for a in arms:
        line = ([a["start"]] if a.get("start") else []) + a["points"]
        pts = " ".join(f"{px(p['step']):.1f},{py(p['acc']):.1f}" for p in line)
        if len(line) > 1:
            parts.append(html('<polyline points="{}" fill="none" stroke="{}" stroke-width="1.8" class="arm-line" '
                              'data-arm="{}"/>', pts, a["color"], a["arm"]))
        for p in a["points"]:
            lo, hi = p.get("ci") or (p["acc"], p["acc"])
            parts.append(html('<line x1="{x:.1f}" x2="{x:.1f}" y1="{:.1f}" y2="{:.1f}" stroke="{c}" stroke-width="1.5"/>'
                              '<circle cx="{x:.1f}" cy="{:.1f}" r="4" fill="{c}" class="arm-point" data-arm="{}">'
                              '<title>{}: eval_acc {:.3f} at step {}, n={}</title></circle>',
                              py(lo), py(hi), py(p["acc"]), a["arm"], a["arm"], p["acc"], p["step"], p.get("n"),
                              x=px(p["step"]), c=a["color"]))
    if base:
        parts.append(html('<rect x="{:.1f}" y="{:.1f}" width="9" height="9" fill="#1d2330" class="base-point">'
                          '<title>base model: {:.3f} at step {}, n={}</title></rect>',
                          px(base["step"]) - 4.5, py(base["acc"]) - 4.5, base["acc"], base["step"], base.get("n")))
    parts.append(Html("</svg>"))
    return join(parts)


def timeline(spans: list[dict], *, width: int = 720) -> Html:
    """The phases as bars on one time axis. spans: [{"label", "start", "end", "note"}] in unix seconds,
    in order; a span without an end (still running or never recorded) is drawn to the last known time."""
    known = [t for s in spans for t in (s["start"], s.get("end")) if t is not None]
    if not known:
        return Html()
    t0, t1 = min(known), max(known)
    span_s = max(t1 - t0, 1e-9)
    label_w, row_h, top = 170, 22, 8
    plot_w = width - label_w - 90
    height = top + row_h * len(spans) + 24
    parts = [html('<svg class="chart timeline" role="img" viewBox="0 0 {w} {h}" width="{w}" height="{h}">'
                  '<title>phases on one time axis</title>', w=width, h=height)]
    for i, s in enumerate(spans):
        y = top + i * row_h
        end = s.get("end") if s.get("end") is not None else t1
        x = label_w + (s["start"] - t0) / span_s * plot_w
        w = max((end - s["start"]) / span_s * plot_w, 2)
        cls = "bar" if s.get("end") is not None else "bar open"
        parts.append(html('<text x="{}" y="{}" class="tick" text-anchor="end">{}</text>'
                          '<rect x="{:.1f}" y="{}" width="{:.1f}" height="{}" class="{}"><title>{}</title></rect>'
                          '<text x="{:.1f}" y="{}" class="tick">{}</text>',
                          label_w - 8, y + 15, s["label"], x, y + 4, w, row_h - 8, cls, s.get("note") or s["label"],
                          x + w + 6, y + 15, s.get("note") or ""))
    parts.append(html('<text x="{}" y="{}" class="tick">0</text><text x="{}" y="{}" class="tick" text-anchor="end">'
                      '{}</text></svg>', label_w, height - 6, label_w + plot_w, height - 6, fmt_duration(t1 - t0)))
    return join(parts)
