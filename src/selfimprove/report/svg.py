"""Inline SVG charts for the run report page (report/page.py): a learning curve and a timeline.

Hand-built rather than drawn with matplotlib: the page must open anywhere with no extra
installed (matplotlib is an optional extra), the SVG stays a few kilobytes per chart, and the
text inside it is real text a browser can find and a test can read. Every string that reaches
the markup goes through `html.escape`.
"""

from __future__ import annotations

import math
from html import escape

from ..ui import fmt_duration

TRAIN_COLOR = "#1f77b4"  # the arm's train reward per step
EVAL_COLOR = "#d95f02"  # its eval point with the 95% interval
SEED_COLORS = ("#1f77b4", "#6baed6", "#08519c", "#4292c6", "#2171b5")


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


def learning_curve(series: list[dict], evals: list[dict], *, title: str, width: int = 450, height: int = 220) -> str:
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

    def px(x: float) -> float:
        return left + (x - x_lo) / (x_hi - x_lo) * plot_w

    def py(y: float) -> float:
        return top + (1 - (y - y_lo) / (y_hi - y_lo)) * plot_h

    parts = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" '
             f'width="{width}" height="{height}"><title>{escape(title)}</title>',
             f'<text x="{left}" y="16" class="chart-title">{escape(title)}</text>']
    for t in _ticks(y_lo, y_hi):
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{py(t):.1f}" y2="{py(t):.1f}" class="grid"/>'
                     f'<text x="{left - 6}" y="{py(t) + 4:.1f}" class="tick" text-anchor="end">{_fmt(t)}</text>')
    for t in _ticks(x_lo + pad, x_hi - pad, 6):
        if float(t).is_integer():
            parts.append(f'<text x="{px(t):.1f}" y="{top + plot_h + 16}" class="tick" text-anchor="middle">{int(t)}</text>')
    parts.append(f'<text x="{left + plot_w / 2}" y="{height - 4}" class="axis" text-anchor="middle">training step</text>')
    parts.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" class="frame"/>')
    for i, line in enumerate(series):
        color = SEED_COLORS[i % len(SEED_COLORS)]
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(line["steps"], line["rewards"]))
        if len(line["steps"]) == 1:
            parts.append(f'<circle cx="{px(line["steps"][0]):.1f}" cy="{py(line["rewards"][0]):.1f}" r="2.5" fill="{color}"/>')
        elif pts:
            parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.6" class="train-line">'
                         f'<title>{escape(line["label"])}</title></polyline>')
    for e in evals:
        if e.get("step") is None:
            continue
        x, (lo, hi) = px(e["step"]), (e.get("ci") or (e["acc"], e["acc"]))
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{py(lo):.1f}" y2="{py(hi):.1f}" stroke="{EVAL_COLOR}" stroke-width="2"/>'
                     f'<circle cx="{x:.1f}" cy="{py(e["acc"]):.1f}" r="4.5" fill="{EVAL_COLOR}" class="eval-point">'
                     f'<title>{escape(e["label"])}</title></circle>')
    legend_x = left + 8
    parts.append(f'<line x1="{legend_x}" x2="{legend_x + 18}" y1="{top + 12}" y2="{top + 12}" stroke="{TRAIN_COLOR}" stroke-width="2"/>'
                 f'<text x="{legend_x + 22}" y="{top + 16}" class="legend">train reward (mean per step)</text>'
                 f'<circle cx="{legend_x + 9}" cy="{top + 28}" r="4" fill="{EVAL_COLOR}"/>'
                 f'<text x="{legend_x + 22}" y="{top + 32}" class="legend">eval accuracy, 95% interval</text>')
    parts.append("</svg>")
    return "".join(parts)


def timeline(spans: list[dict], *, width: int = 720) -> str:
    """The phases as bars on one time axis. spans: [{"label", "start", "end", "note"}] in unix seconds,
    in order; a span without an end (still running or never recorded) is drawn to the last known time."""
    known = [t for s in spans for t in (s["start"], s.get("end")) if t is not None]
    if not known:
        return ""
    t0, t1 = min(known), max(known)
    span_s = max(t1 - t0, 1e-9)
    label_w, row_h, top = 170, 22, 8
    plot_w = width - label_w - 90
    height = top + row_h * len(spans) + 24
    parts = [f'<svg class="chart timeline" role="img" viewBox="0 0 {width} {height}" '
             f'width="{width}" height="{height}"><title>phases on one time axis</title>']
    for i, s in enumerate(spans):
        y = top + i * row_h
        end = s.get("end") if s.get("end") is not None else t1
        x = label_w + (s["start"] - t0) / span_s * plot_w
        w = max((end - s["start"]) / span_s * plot_w, 2)
        cls = "bar" if s.get("end") is not None else "bar open"
        parts.append(f'<text x="{label_w - 8}" y="{y + 15}" class="tick" text-anchor="end">{escape(s["label"])}</text>'
                     f'<rect x="{x:.1f}" y="{y + 4}" width="{w:.1f}" height="{row_h - 8}" class="{cls}">'
                     f'<title>{escape(s.get("note") or s["label"])}</title></rect>'
                     f'<text x="{x + w + 6:.1f}" y="{y + 15}" class="tick">{escape(s.get("note") or "")}</text>')
    parts.append(f'<text x="{label_w}" y="{height - 6}" class="tick">0</text>'
                 f'<text x="{label_w + plot_w}" y="{height - 6}" class="tick" text-anchor="end">'
                 f'{escape(fmt_duration(t1 - t0))}</text></svg>')
    return "".join(parts)

