"""The run report: one self-contained HTML page (R/report.html) a person reads after the run.

Order of the page: the verdict with its caveats and the model to use, always first; the contents
(an anchor per section and iteration); where an open run stands (`selfimprove status`'s view) and
what is missing; the summary table with its intervals, n, split and seeds, then the tests it rests
on; every arm's eval accuracy on one chart, the base model's included; each arm's learning curve
(smoothed) with its eval point; the weakness groups' solve rates; each iteration (buckets with the
teacher's failure modes, gates, refused replies and tokens, then its evidence collapsed: report,
failures, rows, gate report; report/sections.py); on a finalized run only, the eval examples Run A
and Run C disagree on; the phases' timeline. The page holds at 390 px: tables scroll in a wrapper.

Self-contained: CSS inline, charts as inline SVG (report/svg.py), no script, no external
file, no URL. The run dir is untrusted input: every value reaches the markup through
`markup.html` (formatted, capped, bidi controls shown as code points, escaped), whatever its
type; no f-string builds markup here. Written atomically, so a reader never meets half a page,
and re-written whole by every `finalize` and `selfimprove report`. Every page starts with
PAGE_PREFIX, by which `report --out` knows a page it may replace.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..rundir import RunDir, atomic_write_text
from ..ui import fmt_duration
from ..weakness import CLASS_MEANING
from .collect import collect
from .markup import Html, esc, fmt, html, join
from .sections import contents, flips_section, iteration_details, overlay_section, progress_box, stage_text
from .svg import EMA_ALPHA, learning_curve, timeline
from .table import comparison_lines, seed_test_lines, seeds_text, teacher_tokens_line

CSS = """
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;background:#f6f7f9;margin:0}
main{max-width:980px;margin:0 auto;padding:24px 28px 48px;background:#fff;min-height:100vh;overflow-wrap:break-word}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:34px 0 8px;border-bottom:1px solid #e3e6eb;padding-bottom:4px}
h3{font-size:16px;margin:20px 0 6px}.sub{color:#5b6474;margin:0 0 16px}.muted{color:#5b6474;font-size:13px}
.verdict{font-size:18px;font-weight:600;padding:12px 16px;border-radius:6px;background:#eef4ff;border-left:5px solid #2f6fdf}
.verdict.beat{background:#eaf7ee;border-color:#2e9b4f}.verdict.notbeat{background:#fff6e6;border-color:#d98b00}
.verdict.none{background:#f1f2f4;border-color:#8a93a3}.alert{background:#fdecec;border-left:5px solid #c62828;padding:10px 14px}
.missing{background:#fff8e1;border-left:5px solid #e0a800;padding:8px 14px;margin:14px 0}.missing li{margin:2px 0}
.rec{margin:10px 0 0}.rec code{word-break:break-all}
table{border-collapse:collapse;margin:8px 0;font-size:14px}th,td{padding:4px 10px;border-bottom:1px solid #e3e6eb;text-align:left}
th{background:#f1f3f6;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
#summary-table{width:100%}#summary-table td code{word-break:break-all}
tr.best td{background:#eef8f0;font-weight:600}code{font-size:13px;background:#f1f3f6;padding:0 3px;border-radius:3px}
ul.tests{font-size:13px;color:#2c3340}.charts{display:flex;flex-wrap:wrap;gap:14px}
figure{margin:0;border:1px solid #e3e6eb;border-radius:6px;padding:6px}figcaption{font-size:13px;color:#5b6474;max-width:450px}
svg.chart{max-width:100%;height:auto;font-family:inherit}.chart-title{font-size:13px;font-weight:600;fill:#1d2330}
.tick{font-size:11px;fill:#5b6474}.axis{font-size:12px;fill:#5b6474}.legend{font-size:11px;fill:#1d2330}
.grid{stroke:#eceef2}.frame{fill:none;stroke:#c9ced6}.bar{fill:#5b8def}.bar.open{fill:#c9d7f5}
.iter{border:1px solid #e3e6eb;border-radius:6px;padding:4px 16px 10px;margin:12px 0}
.pass{color:#2e7d32;font-weight:600}.fail{color:#c62828;font-weight:600}
.cls-never{color:#c62828}.cls-rare{color:#d98b00}.cls-learning{color:#2f6fdf}.cls-solved{color:#2e7d32}
.scroll{overflow-x:auto;max-width:100%}.scroll table{margin:0}code,h1{overflow-wrap:anywhere}
.toc{background:#f6f7f9;border:1px solid #e3e6eb;border-radius:6px;padding:6px 14px;margin:16px 0}
.toc ul{margin:4px 0;padding-left:18px;columns:2 14em}.toc li{margin:1px 0}
details{border:1px solid #e3e6eb;border-radius:6px;padding:4px 10px;margin:6px 0}summary{cursor:pointer;font-weight:600}
pre.text{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f7f9;padding:6px 8px;border-radius:4px;font-size:13px;margin:2px 0 8px}
.sample{border-top:1px solid #e3e6eb;padding:4px 0}.sealed{background:#fdecec;border-left:5px solid #c62828;padding:8px 14px}
.swatch{display:inline-block;width:11px;height:11px;border-radius:6px;margin-right:6px}.swatch.base{background:#1d2330;border-radius:0}
ul.legend-list{list-style:none;padding:0;margin:4px 0}figure.wide figcaption{max-width:none}.charts figure{min-width:0;max-width:100%}
@media (max-width:600px){main{padding:14px 12px 32px}.iter{padding:2px 8px 8px}.toc ul{columns:1}.scroll td code{white-space:nowrap;word-break:normal;overflow-wrap:normal}}
"""


# The first bytes of every page this module writes: `report --out` replaces an existing file only
# when it starts with them (a page the tool wrote), never metrics.json or a stranger's file.
PAGE_MARKER = '<meta name="generator" content="selfimprove report page">'
PAGE_PREFIX = '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">' + PAGE_MARKER


MAX_BUCKETS = 60  # a valid report has at most a few dozen (report gate: domain and sub_domain counts)


def _pct(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else fmt(x, f".{digits}f")


def _ci(ci: list | tuple | None) -> str:
    if not ci:
        return "-"
    if not isinstance(ci, (list, tuple)) or len(ci) != 2:
        return str(ci)
    return f"[{fmt(ci[0], '.3f')}, {fmt(ci[1], '.3f')}]"


def _ts(ts: float | None) -> str:
    try:
        return "-" if ts is None else datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    except (TypeError, ValueError, OverflowError, OSError):  # a forged timestamp: shown as it is
        return str(ts)


def _header(data: dict) -> Html:
    run = data["run"]
    status = stage_text(data.get("progress"), run["status"]) + (f" (ended: {run['end_reason']})" if run.get("end_reason") else "")
    if run["status"] == "aborted" and run.get("reason"):  # why it stopped, in the run's own words
        status += f": {run['reason']}"
    took = f", {fmt_duration(run['total_duration_s'])} in all" if run.get("total_duration_s") is not None else ""
    return html("<h1>Run report: {}</h1><p class=\"sub\">student <code>{}</code> on <code>{}</code>; "
                "status <b>{}</b>{}; started {}; run dir <code>{}</code></p>",
                run["dataset"], run["model"], run["hub_id"], status, took, _ts(run["start_ts"]), data["run_dir"])


def _verdict(data: dict) -> Html:
    table = data["table"] or {}
    parts = [html("<h2 id=\"verdict\">Verdict</h2>")]
    if table.get("no_signal"):
        parts.append(html("<p class=\"alert\"><b>NOT A RESULT:</b> {}</p>", table["no_signal"]))
    v = table.get("verdict")
    if v:
        kind = "beat" if v.get("data_beats_control") else ("none" if v.get("data_beats_control") is None else "notbeat")
        parts.append(html("<p class=\"verdict {}\">{}.</p><p>{}.</p><p>{}.</p>", kind,
                          v["sentence"][0].upper() + v["sentence"][1:], v["figures"], v["use_line"]))
        # its caveats stay with it (seed variance unmeasured, the best iteration's winner's curse), not below the table
        parts += [html("<p class=\"muted caveat\">Caveat: {}</p>", table[k]) for k in ("seed_caveat", "caveat")
                  if table.get(k)]
    else:
        parts.append(html("<p class=\"verdict none\">No verdict yet: the targeted data is judged against equal compute "
                          "on real data (Run A vs Run C) in Phase 4, which this run has not finished.</p>"))
    rec = table.get("recommendation")
    if rec and rec["status"] == "none":
        parts.append(html("<p class=\"rec\"><b>Recommended checkpoint: none.</b> {}</p>", rec["text"]))
    elif rec:
        parts.append(html("<p class=\"rec\"><b>Recommended checkpoint ({}):</b> {}<br><code>{}</code></p>",
                          rec["status"], rec["text"], rec["checkpoint"]))
    return join(parts)


def _missing(data: dict) -> Html:
    if not data["missing"]:
        return Html()
    items = join(html("<li>{}</li>", m) for m in data["missing"])
    return html("<div class=\"missing\" id=\"missing\"><b>Not in this report yet</b><ul>{}</ul></div>", items)


def _measured_on(rows: list[dict]) -> str:
    splits = sorted({str(r["eval_split"]) for r in rows})
    sizes = sorted({str(r["n_eval"]) for r in rows})
    seeds = sorted({str(r["n_seeds"]) for r in rows})
    return (f"split {'/'.join(splits)}; {'/'.join(sizes)} eval rollouts per arm; "
            f"{'/'.join(seeds)} training seed(s) per arm")


def _summary(data: dict) -> Html:
    table = data["table"]
    if table and table.get("error"):  # a record the table rests on is unreadable (commands/report.py)
        return html("<h2 id=\"summary\">Summary table</h2><p class=\"alert\">Not shown: {}</p>", table["error"])
    if not table or not table.get("rows"):
        return html("<h2 id=\"summary\">Summary table</h2><p>No arm has been evaluated yet.</p>")
    rows = table["rows"]
    head = html("<tr><th>arm</th><th>rows trained on</th><th>eval_acc</th><th>± sd</th><th>training seed ids</th>"
                "<th>95% CI</th><th>n eval (split)</th><th>checkpoint (in the run dir)</th></tr>")
    body = []
    for r in rows:
        marks = (" \u2190 best iteration" if r["best"] else "") + (
            " \u2190 recommended" if table.get("recommended") == r["arm"] else "")
        body.append(html("<tr class=\"{}\" data-arm=\"{}\"><td>{}{}</td><td class=\"num\">{}</td>"
                         "<td class=\"num\">{:.3f}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                         "<td class=\"num\" title=\"{}\">{}</td><td class=\"num\">{} ({})</td><td><code>{}</code></td></tr>",
                         "best" if r["best"] else "", r["arm"], r["label"], marks, r["rows"], r["eval_acc"],
                         _pct(r.get("eval_acc_sd")), seeds_text(r["seeds"]), r["ci_kind"], _ci(r["acc_ci95"]),
                         r["n_eval"], r["eval_split"], r["checkpoint_rel"]))
    parts = [html("<h2 id=\"summary\">Summary table</h2><p class=\"muted\">Eval accuracy on the real environment: "
                  "{}. 95% CI: Wilson over eval examples for a one-seed arm, t interval of the mean over seeds for an "
                  "arm with several.</p><div class=\"scroll\"><table id=\"summary-table\">{}{}</table></div>",
                  _measured_on(rows), head, join(body))]
    for title, lines in (("Seed-aware tests (per-seed accuracy on shared eval examples; Welch between arms, "
                          "one-sample against iter_0)", seed_test_lines(table.get("seed_tests") or [])),
                         ("Paired tests per checkpoint (exact McNemar on correctness, bootstrap CI on reward; "
                          "eval-sample noise only)", comparison_lines(table.get("comparisons") or []))):
        if lines:
            parts.append(html("<h3>{}</h3><ul class=\"tests\">{}</ul>", title, join(html("<li>{}</li>", x) for x in lines)))
    notes = [table.get(k) for k in ("accuracy_rule",) if table.get(k)]
    if not table.get("verdict"):  # no verdict above to carry the caveats: they stay with the table
        notes += [table.get(k) for k in ("seed_caveat", "caveat") if table.get(k)]
    parts += [html("<p class=\"muted\">Note: {}</p>", n) for n in notes]
    return join(parts)


def _curves(data: dict) -> Html:
    if not data["curves"]:
        return html("<h2 id=\"curves\">Learning curves</h2><p>No arm has trained yet.</p>")
    figures = []
    for chart in data["curves"]:
        series = [{"label": f"{m['arm']} (seed {m['seed']})", "steps": m["steps"], "rewards": m["rewards"]}
                  for m in chart["members"]]
        evals = [{"label": f"{m['arm']}: eval_acc {_pct(m['eval']['acc'])} {_ci(m['eval']['ci'])}, n={m['eval']['n_eval']}",
                  **m["eval"]} for m in chart["members"]]
        n_steps = max((len(m["steps"]) for m in chart["members"]), default=0)
        first = chart["members"][0]["eval"]
        caption = (f"{chart['label']}: train reward per step over {n_steps} step(s) of TRAIN rollouts"
                   + (f" ({len(chart['members'])} seeds)" if len(chart["members"]) > 1 else "")
                   + f"; eval_acc {_pct(first['acc'])} {_ci(first['ci'])} on {first['n_eval']} rollouts ({chart['eval_split']})"
                   + ("" if n_steps else "; no train rollouts on disk (an arm reused from --init-from, or pruned)")
                   + f"; EMA alpha {EMA_ALPHA}")
        svg = learning_curve(series, evals, title=chart["label"])
        figures.append(html("<figure class=\"curve\" data-arm=\"{}\">{}<figcaption>{}</figcaption></figure>",
                            chart["arm"], svg, caption))
    return html("<h2 id=\"curves\">Learning curves</h2><p class=\"muted\">Faint blue: mean reward of each training "
                "step's TRAIN rollouts (one line per training seed). Dark blue: the same smoothed, an exponential moving "
                "average (EMA) with alpha {} (each point {} of its step's mean and {} of the smoothed value before). "
                "Orange: the arm's eval accuracy at its final step with its 95% interval (eval rows are sealed: only "
                "this aggregate is read).</p><p class=\"caveat\"><b>Not comparable across arms:</b> each arm's TRAIN "
                "rewards come from different data (iter_0 and run_c: the real train split; the iterations and run_a: "
                "generated rows; run_b: both), so a higher train curve is not a better arm. The eval accuracy is "
                "comparable: every arm is scored on the real env's eval split (at equal n; the overlay above).</p>"
                "<div class=\"charts\">{}</div>",
                EMA_ALPHA, fmt(EMA_ALPHA, ".0%"), fmt(1 - EMA_ALPHA, ".0%"), join(figures))


def _group_row(g: dict, extra: Html = Html()) -> Html:
    return html("<tr><td><code>{}</code></td><td class=\"cls-{}\">{}</td><td class=\"num\">{}</td>"
                "<td class=\"num\">{} {}</td>{}</tr>", g["group"], g["class"], g["class"], g["rollouts"],
                _pct(g["solve_rate"]), _ci(g["solve_rate_ci95"]), extra)


def _weakness(data: dict) -> Html:
    w = data["weakness"]
    head = html("<h2 id=\"weaknesses\">Weakness groups</h2>")
    if not w:
        return join([head, html("<p>No train rollouts of iter_0 yet: the weakness groups come from the baseline.</p>")])
    if w.get("error"):  # a weakness_stats.json that fails its model: the page says which and what to do
        return join([head, html("<p class=\"alert\">{}</p>", w["error"])])
    real = w["real"]
    win = real["window"]
    cols = join(html("<th>{}</th>", c["label"]) for c in w["columns"])
    body = [_group_row(g, join(html("<td class=\"num\">{}</td>", _pct(c["rates"].get(g["group"]))) for c in w["columns"]))
            for g in real["groups"]]
    classes = "; ".join(f"{k} {v['groups']} groups" for k, v in real["by_class"].items())
    steps = win["steps"]
    parts = [head, html("<p class=\"muted\">Solve rate = share of TRAIN rollouts solved (the eval's rule), per prompt group "
                        "(the prompt with its digits as #). iter_0 on the real train split, steps {}-{}, {} rollouts, "
                        "{} groups: {}. The {} weakest are shown; a later arm's column is its solve rate on the same "
                        "group over its own run (- where it saw none).</p>",
                        steps[0] if steps else "-", steps[-1] if steps else "-", win["rollouts"], real["n_groups"],
                        classes, len(real["groups"])),
             html("<div class=\"scroll\"><table id=\"weakness-table\"><tr><th>group</th><th>class at iter_0</th>"
                  "<th>rollouts</th><th>iter_0 solve rate [95% CI]</th>{}</tr>{}</table></div>", cols, join(body)),
             html("<p class=\"muted\">{}</p>", join((html("<b>{}</b>: {}.", k, v) for k, v in CLASS_MEANING.items()), " "))]
    for own in w["own"]:
        by = "; ".join(f"{k} {v['groups']}" for k, v in own["by_class"].items())
        parts.append(html("<h3>{} on its own generated rows</h3><p class=\"muted\">{} TRAIN rollouts, {} groups ({}); "
                          "weakest {}:</p><div class=\"scroll\"><table><tr><th>group</th><th>class</th>"
                          "<th>rollouts</th><th>solve rate [95% CI]</th></tr>{}</table></div>", own["arm"], own["window"]["rollouts"],
                          own["n_groups"], by, len(own["groups"]), join(_group_row(g) for g in own["groups"])))
    return join(parts)


def _gate_line(name: str, gate: dict | None) -> Html:
    if gate is None:
        return html("<li>{}: not run yet</li>", name)
    state = html("<span class=\"pass\">passed</span>") if gate["passed"] else html("<span class=\"fail\">failed</span>")
    checks = html(" ({})", ", ".join(map(str, gate["checks"]))) if gate["checks"] else Html()
    fails = join(html("<li><code>{}</code></li>", f) for f in gate["failures"][:8])
    more = html("<li>... {} more</li>", len(gate["failures"]) - 8) if len(gate["failures"]) > 8 else Html()
    return html("<li>{}: {}{}{}</li>", name, state, checks, html("<ul>{}{}</ul>", fails, more) if fails else Html())


def _attempts_text(it: dict) -> str:
    """'Attempts: report gate 1 (passed); dataset gate 3 (failed: seed_hard; failed: round_trip; passed).'"""
    attempts = it["attempts"]
    if not attempts:
        return ("Attempts: not recorded (this run's gates ran before gate_attempts.json existed: only each gate's "
                "last report is kept)" if it["dataset_gate"] or it["report_gate"] else "Attempts: none yet")
    parts = []
    for gate in ("report", "dataset"):
        mine = [a for a in attempts if a.get("gate") == gate]
        if mine:
            results = "; ".join("passed" if a.get("passed") else "failed: " + (", ".join(map(str, a.get("failed_rules") or [])) or "?")
                                for a in mine)
            parts.append(f"{gate} gate {len(mine)} ({results})")
    return "Attempts: " + "; ".join(parts) + "."


def _iteration(it: dict) -> Html:
    result = (f"eval_acc {_pct(it['eval_acc'])} {_ci(it['acc_ci95'])} on {it['n_eval']} rollouts"
              if it["eval_acc"] is not None else "not evaluated yet")
    if it["verdict"]:
        result += f"; {fmt(it['delta_vs_prev'], '+.3f')} vs the previous iteration: {it['verdict']}"
    if (vs := it.get("vs_iter0")) and isinstance(vs, dict) and vs.get("mcnemar_p") is not None:
        result += f"; vs iter_0 exact McNemar p={fmt(vs['mcnemar_p'], '.3g')} ({vs.get('verdict')})"
    rows = "" if it["rows"] is None else (f"{it['rows']} rows generated" + (
        f", {it['rows_dropped_eval_overlap']} dropped for overlapping the evaluated questions"
        if it["rows_dropped_eval_overlap"] else ""))
    shown = it["buckets"][:MAX_BUCKETS]  # a forged front matter may list thousands: the page stays small
    buckets = join(html("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td></tr>",
                        b["domain"], b["severity"], b["sub_domain"], b.get("failure_mode") or "-", b["rows"])
                   for b in shown)
    if len(it["buckets"]) > MAX_BUCKETS:
        buckets = join([buckets, html("<tr><td colspan=\"5\">... {} more buckets not shown</td></tr>",
                                      len(it["buckets"]) - MAX_BUCKETS)])
    note = html("<p class=\"muted\">{}</p>", it["note"]) if it["note"] else Html()
    bucket_html = (html("<div class=\"scroll\"><table class=\"buckets\"><tr><th>domain</th><th>severity</th>"
                        "<th>sub-domain</th><th>failure mode (the teacher's words)</th><th>target rows</th></tr>{}"
                        "</table></div>", buckets) if buckets else Html())
    llm = it["llm"]
    teacher = [] if llm is None else [f"LLM teacher: {llm['replies']} replies, {llm['refused']} refused "
                                       "(a failed gate or an unusable reply)"]
    if it["teacher_tokens"] is not None:
        teacher.append(f"{it['teacher_tokens']} teacher tokens (prompt + completion)")
    return html("<section class=\"iter\" id=\"iter-{}\"><h3>iter_{}: {}</h3><p>{}{}.</p>"
                "<b>Buckets of the weakness report</b>{}{}<ul>{}{}</ul><p class=\"attempts\">{}</p>{}{}</section>",
                it["n"], it["n"], it["stage"], result, ". " + rows if rows else "", bucket_html, note,
                _gate_line("report gate", it["report_gate"]), _gate_line("dataset gate", it["dataset_gate"]),
                _attempts_text(it), html("<p class=\"muted\">{}.</p>", "; ".join(teacher)) if teacher else Html(),
                iteration_details(it["n"], it["samples"]))


def _iterations(data: dict) -> Html:
    head = html("<h2 id=\"iterations\">Iterations</h2>")
    if not data["iterations"]:
        return join([head, html("<p>No iteration has started.</p>")])
    parts = [head, *(_iteration(it) for it in data["iterations"])]
    if line := teacher_tokens_line(data["teacher_tokens"]):
        parts.append(html("<p class=\"muted\">{}</p>", line))
    return join(parts)


def _timeline(data: dict) -> Html:
    spans = data["timeline"]
    head = html("<h2 id=\"timeline\">Timeline</h2>")
    if not spans:
        return join([head, html("<p>Only bootstrap has run.</p>")])
    rows = join(html("<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td></tr>", s["label"], _ts(s["end"]), s["note"])
                for s in spans)
    partial = html("<p class=\"alert\">{}</p>", data["timeline_note"]) if data.get("timeline_note") else Html()
    return html("{}<p class=\"muted\">Each phase from the end of the one before to the time its result was recorded "
                "(run.json, hub_env.json, metrics.json); the --budget clock covers the iterations only.</p>{}{}"
                "<div class=\"scroll\"><table><tr><th>phase</th><th>recorded</th><th>took</th></tr>{}</table></div>",
                head, partial, timeline(spans), rows)


def _eval_split(data: dict) -> str:
    rows = (data["table"] or {}).get("rows") or []
    return "/".join(sorted({str(r["eval_split"]) for r in rows})) or "eval"


def render(data: dict) -> str:
    """The page's HTML: every value through `markup.html`, so none reaches it unescaped. The verdict comes
    first, then the contents; the parts a person drills into are collapsed (<details>, no script)."""
    split = _eval_split(data)
    body = join([_header(data), _verdict(data), contents(data), progress_box(data.get("progress")), _missing(data),
                 _summary(data), overlay_section(data["overlay"], split), _curves(data), _weakness(data),
                 _iterations(data), flips_section(data.get("flips"), split), _timeline(data)])
    sealed = ("Eval rows are sealed: the page holds only numeric aggregates of them, but for the examples Run A "
              "and Run C disagree on, shown because the run is finalized." if data.get("flips") is not None else
              "Eval rows are sealed: the page holds only numeric aggregates of them.")
    footer = html("<p class=\"muted\" style=\"margin-top:32px\">Written by selfimprove on {} from the run dir's files. "
                  "{}</p>", _ts(data["generated_at"]), sealed)
    return html(PAGE_PREFIX.replace("{", "{{").replace("}", "}}") + "<title>{}</title>"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>{}</style></head>"
                "<body><main>{}{}</main></body></html>\n",
                f"selfimprove report: {data['run']['dataset']}", Html(CSS), body, footer)


def write_report(rd: RunDir, table: dict[str, Any] | None, path: Path | None = None, *,
                 mode: int | None = None, problems: list[str] | None = None) -> Path:
    """Write the page (default R/report.html; an `--out` path is checked by `target.checked_target`)
    atomically, with permission bits `mode` (default the tool's); return its path. `problems` gets
    the run dir's records that failed their model, one line each (the page shows each in its part's place)."""
    target = Path(path) if path is not None else rd.report_html
    data = collect(rd, table)
    atomic_write_text(target, render(data), mode=mode)
    if problems is not None:
        problems.extend(data["problems"])
    return target
