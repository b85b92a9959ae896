"""The run report: one self-contained HTML page (R/report.html) a person reads after the run.

Order of the page: the verdict and the model to use; what is missing (a run not finished);
the summary table with its intervals, n, split and seeds, then the tests it rests on; each
arm's learning curve with its eval point; the weakness groups' solve rates; each iteration
(buckets, gates, the teacher's refused replies and tokens); the phases' timeline.

Self-contained: CSS inline, charts as inline SVG (report/svg.py), no script, no external
file, no URL. Every value from the run dir is escaped. Written atomically, so a reader never
meets half a page, and re-written whole by every `finalize` and `selfimprove report`.
"""

from __future__ import annotations

from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any

from ..rundir import RunDir, atomic_write_text
from ..ui import fmt_duration
from ..weakness import CLASS_MEANING
from .collect import collect
from .svg import learning_curve, timeline
from .table import comparison_lines, seed_test_lines, seeds_text, teacher_tokens_line

CSS = """
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;background:#f6f7f9;margin:0}
main{max-width:980px;margin:0 auto;padding:24px 28px 48px;background:#fff;min-height:100vh}
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
"""


def _e(value: Any) -> str:
    return escape("" if value is None else str(value))


def _pct(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _ci(ci: list | tuple | None) -> str:
    return "-" if not ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _ts(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _header(data: dict) -> str:
    run = data["run"]
    status = run["status"] + (f" (ended: {run['end_reason']})" if run.get("end_reason") else "")
    if run["status"] == "aborted" and run.get("reason"):  # why it stopped, in the run's own words
        status += f": {run['reason']}"
    took = f", {fmt_duration(run['total_duration_s'])} in all" if run.get("total_duration_s") is not None else ""
    return (f"<h1>Run report: {_e(run['dataset'])}</h1>"
            f"<p class=\"sub\">student <code>{_e(run['model'])}</code> on <code>{_e(run['hub_id'])}</code>; "
            f"status <b>{_e(status)}</b>{_e(took)}; started {_e(_ts(run['start_ts']))}; "
            f"run dir <code>{_e(data['run_dir'])}</code></p>")


def _verdict(data: dict) -> str:
    table = data["table"] or {}
    parts = ["<h2 id=\"verdict\">Verdict</h2>"]
    if table.get("no_signal"):
        parts.append(f"<p class=\"alert\"><b>NOT A RESULT:</b> {_e(table['no_signal'])}</p>")
    v = table.get("verdict")
    if v:
        kind = "beat" if v.get("data_beats_control") else ("none" if v.get("data_beats_control") is None else "notbeat")
        parts.append(f"<p class=\"verdict {kind}\">{_e(v['sentence'][0].upper() + v['sentence'][1:])}.</p>"
                     f"<p>{_e(v['figures'])}.</p><p>{_e(v['use_line'])}.</p>")
    else:
        parts.append("<p class=\"verdict none\">No verdict yet: the targeted data is judged against equal compute "
                     "on real data (Run A vs Run C) in Phase 4, which this run has not finished.</p>")
    rec = table.get("recommendation")
    if rec and rec["status"] == "none":
        parts.append(f"<p class=\"rec\"><b>Recommended checkpoint: none.</b> {_e(rec['text'])}</p>")
    elif rec:
        parts.append(f"<p class=\"rec\"><b>Recommended checkpoint ({_e(rec['status'])}):</b> {_e(rec['text'])}<br>"
                     f"<code>{_e(rec['checkpoint'])}</code></p>")
    return "".join(parts)


def _missing(data: dict) -> str:
    if not data["missing"]:
        return ""
    items = "".join(f"<li>{_e(m)}</li>" for m in data["missing"])
    return f"<div class=\"missing\" id=\"missing\"><b>Not in this report yet</b><ul>{items}</ul></div>"


def _measured_on(rows: list[dict]) -> str:
    splits = sorted({r["eval_split"] for r in rows})
    sizes = sorted({r["n_eval"] for r in rows})
    seeds = sorted({r["n_seeds"] for r in rows})
    return (f"split {'/'.join(splits)}; {'/'.join(map(str, sizes))} eval rollouts per arm; "
            f"{'/'.join(map(str, seeds))} training seed(s) per arm")


def _summary(data: dict) -> str:
    table = data["table"]
    if not table or not table.get("rows"):
        return "<h2 id=\"summary\">Summary table</h2><p>No arm has been evaluated yet.</p>"
    rows = table["rows"]
    head = ("<tr><th>arm</th><th>rows trained on</th><th>eval_acc</th><th>± sd</th><th>training seeds</th>"
            "<th>95% CI</th><th>n eval (split)</th><th>checkpoint (in the run dir)</th></tr>")
    body = []
    for r in rows:
        best = " &larr; best iteration" if r["best"] else ""
        rec = " &larr; recommended" if table.get("recommended") == r["arm"] else ""
        sd = _pct(r.get("eval_acc_sd"))
        body.append(f"<tr class=\"{'best' if r['best'] else ''}\" data-arm=\"{_e(r['arm'])}\"><td>{_e(r['label'])}{best}{rec}</td>"
                    f"<td class=\"num\">{_e(r['rows'])}</td><td class=\"num\">{r['eval_acc']:.3f}</td>"
                    f"<td class=\"num\">{sd}</td><td class=\"num\">{_e(seeds_text(r['seeds']))}</td>"
                    f"<td class=\"num\" title=\"{_e(r['ci_kind'])}\">{_ci(r['acc_ci95'])}</td>"
                    f"<td class=\"num\">{r['n_eval']} ({_e(r['eval_split'])})</td><td><code>{_e(r['checkpoint_rel'])}</code></td></tr>")
    parts = [f"<h2 id=\"summary\">Summary table</h2><p class=\"muted\">Eval accuracy on the real environment: "
             f"{_e(_measured_on(rows))}. 95% CI: Wilson over eval examples for a one-seed arm, t interval of the mean "
             f"over seeds for an arm with several.</p><table id=\"summary-table\">{head}{''.join(body)}</table>"]
    for title, lines in (("Seed-aware tests (per-seed accuracy on shared eval examples; Welch between arms, "
                          "one-sample against iter_0)", seed_test_lines(table.get("seed_tests") or [])),
                         ("Paired tests per checkpoint (exact McNemar on correctness, bootstrap CI on reward; "
                          "eval-sample noise only)", comparison_lines(table.get("comparisons") or []))):
        if lines:
            parts.append(f"<h3>{_e(title)}</h3><ul class=\"tests\">" + "".join(f"<li>{_e(x)}</li>" for x in lines) + "</ul>")
    notes = [table.get(k) for k in ("accuracy_rule", "seed_caveat", "caveat") if table.get(k)]
    parts += [f"<p class=\"muted\">Note: {_e(n)}</p>" for n in notes]
    return "".join(parts)


def _curves(data: dict) -> str:
    if not data["curves"]:
        return "<h2 id=\"curves\">Learning curves</h2><p>No arm has trained yet.</p>"
    figures = []
    for chart in data["curves"]:
        series = [{"label": f"{m['arm']} (seed {m['seed']})", "steps": m["steps"], "rewards": m["rewards"]}
                  for m in chart["members"]]
        evals = [{"label": f"{m['arm']}: eval_acc {m['eval']['acc']:.3f} {_ci(m['eval']['ci'])}, n={m['eval']['n_eval']}",
                  **m["eval"]} for m in chart["members"]]
        n_steps = max((len(m["steps"]) for m in chart["members"]), default=0)
        first = chart["members"][0]["eval"]
        caption = (f"{chart['label']}: train reward per step over {n_steps} step(s) of TRAIN rollouts"
                   + (f" ({len(chart['members'])} seeds)" if len(chart["members"]) > 1 else "")
                   + f"; eval_acc {first['acc']:.3f} {_ci(first['ci'])} on {first['n_eval']} rollouts ({chart['eval_split']})"
                   + ("" if n_steps else "; no train rollouts on disk (an arm reused from --init-from, or pruned)"))
        svg = learning_curve(series, evals, title=chart["label"])
        figures.append(f"<figure class=\"curve\" data-arm=\"{_e(chart['arm'])}\">{svg}<figcaption>{_e(caption)}</figcaption></figure>")
    return ("<h2 id=\"curves\">Learning curves</h2><p class=\"muted\">Blue: mean reward of each training step's TRAIN "
            "rollouts (one line per training seed). Orange: the arm's eval accuracy at its final step with its 95% "
            "interval (eval rows are sealed: only this aggregate is read).</p>"
            f"<div class=\"charts\">{''.join(figures)}</div>")


def _rate(g: dict | None) -> str:
    return "-" if g is None else f"{g:.3f}"


def _weakness(data: dict) -> str:
    w = data["weakness"]
    head = "<h2 id=\"weaknesses\">Weakness groups</h2>"
    if not w:
        return head + "<p>No train rollouts of iter_0 yet: the weakness groups come from the baseline.</p>"
    real = w["real"]
    win = real["window"]
    cols = "".join(f"<th>{_e(c['label'])}</th>" for c in w["columns"])
    body = []
    for g in real["groups"]:
        other = "".join(f"<td class=\"num\">{_rate(c['rates'].get(g['group']))}</td>" for c in w["columns"])
        body.append(f"<tr><td><code>{_e(g['group'])}</code></td><td class=\"cls-{_e(g['class'])}\">{_e(g['class'])}</td>"
                    f"<td class=\"num\">{g['rollouts']}</td><td class=\"num\">{g['solve_rate']:.3f} {_ci(g['solve_rate_ci95'])}</td>{other}</tr>")
    classes = "; ".join(f"{k} {v['groups']} groups" for k, v in real["by_class"].items())
    parts = [head, f"<p class=\"muted\">Solve rate = share of TRAIN rollouts solved (the eval's rule), per prompt group "
             f"(the prompt with its digits as #). iter_0 on the real train split, steps {_e(win['steps'][0] if win['steps'] else '-')}"
             f"-{_e(win['steps'][-1] if win['steps'] else '-')}, {win['rollouts']} rollouts, {real['n_groups']} groups: "
             f"{_e(classes)}. The {len(real['groups'])} weakest are shown; a later arm's column is its solve rate on the same "
             "group over its own run (- where it saw none).</p>",
             f"<table id=\"weakness-table\"><tr><th>group</th><th>class at iter_0</th><th>rollouts</th>"
             f"<th>iter_0 solve rate [95% CI]</th>{cols}</tr>{''.join(body)}</table>",
             "<p class=\"muted\">" + " ".join(f"<b>{_e(k)}</b>: {_e(v)}." for k, v in CLASS_MEANING.items()) + "</p>"]
    for own in w["own"]:
        rows = "".join(f"<tr><td><code>{_e(g['group'])}</code></td><td class=\"cls-{_e(g['class'])}\">{_e(g['class'])}</td>"
                       f"<td class=\"num\">{g['rollouts']}</td><td class=\"num\">{g['solve_rate']:.3f} {_ci(g['solve_rate_ci95'])}</td></tr>"
                       for g in own["groups"])
        by = "; ".join(f"{k} {v['groups']}" for k, v in own["by_class"].items())
        parts.append(f"<h3>{_e(own['arm'])} on its own generated rows</h3><p class=\"muted\">{own['window']['rollouts']} "
                     f"TRAIN rollouts, {own['n_groups']} groups ({_e(by)}); weakest {len(own['groups'])}:</p>"
                     f"<table><tr><th>group</th><th>class</th><th>rollouts</th><th>solve rate [95% CI]</th></tr>{rows}</table>")
    return "".join(parts)


def _gate_line(name: str, gate: dict | None) -> str:
    if gate is None:
        return f"<li>{_e(name)}: not run yet</li>"
    state = "<span class=\"pass\">passed</span>" if gate["passed"] else "<span class=\"fail\">failed</span>"
    checks = f" ({_e(', '.join(gate['checks']))})" if gate["checks"] else ""
    fails = "".join(f"<li><code>{_e(f)}</code></li>" for f in gate["failures"][:8])
    more = f"<li>... {len(gate['failures']) - 8} more</li>" if len(gate["failures"]) > 8 else ""
    return f"<li>{_e(name)}: {state}{checks}" + (f"<ul>{fails}{more}</ul>" if fails else "") + "</li>"


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
            results = "; ".join("passed" if a.get("passed") else "failed: " + (", ".join(a.get("failed_rules") or []) or "?")
                                for a in mine)
            parts.append(f"{gate} gate {len(mine)} ({results})")
    return "Attempts: " + "; ".join(parts) + "."


def _iterations(data: dict) -> str:
    head = "<h2 id=\"iterations\">Iterations</h2>"
    if not data["iterations"]:
        return head + "<p>No iteration has started.</p>"
    parts = [head]
    for it in data["iterations"]:
        result = (f"eval_acc {it['eval_acc']:.3f} {_ci(it['acc_ci95'])} on {it['n_eval']} rollouts"
                  if it["eval_acc"] is not None else "not evaluated yet")
        if it["verdict"]:
            result += f"; {it['delta_vs_prev']:+.3f} vs the previous iteration: {it['verdict']}"
        if (vs := it.get("vs_iter0")) and vs.get("mcnemar_p") is not None:
            result += f"; vs iter_0 exact McNemar p={vs['mcnemar_p']:.3g} ({vs['verdict']})"
        rows = "" if it["rows"] is None else (f"{it['rows']} rows generated" + (
            f", {it['rows_dropped_eval_overlap']} dropped for overlapping the evaluated questions"
            if it["rows_dropped_eval_overlap"] else ""))
        buckets = "".join(f"<tr><td>{_e(b['domain'])}</td><td>{_e(b['severity'])}</td><td>{_e(b['sub_domain'])}</td>"
                          f"<td class=\"num\">{b['rows']}</td></tr>" for b in it["buckets"])
        note = f"<p class=\"muted\">{_e(it['note'])}</p>" if it["note"] else ""
        bucket_html = (f"<table class=\"buckets\"><tr><th>domain</th><th>severity</th><th>failure mode</th><th>target rows</th></tr>"
                       f"{buckets}</table>" if buckets else "") + note
        llm = it["llm"]
        teacher = [] if llm is None else [f"LLM teacher: {llm['replies']} replies, {llm['refused']} refused "
                                           "(a failed gate or an unusable reply)"]
        if it["teacher_tokens"] is not None:
            teacher.append(f"{it['teacher_tokens']} teacher tokens (prompt + completion)")
        parts.append(f"<section class=\"iter\" id=\"iter-{it['n']}\"><h3>iter_{it['n']}: {_e(it['stage'])}</h3>"
                     f"<p>{_e(result)}{'. ' + _e(rows) if rows else ''}.</p><b>Buckets of the weakness report</b>{bucket_html}"
                     f"<ul>{_gate_line('report gate', it['report_gate'])}{_gate_line('dataset gate', it['dataset_gate'])}</ul>"
                     f"<p class=\"attempts\">{_e(_attempts_text(it))}</p>"
                     + (f"<p class=\"muted\">{_e('; '.join(teacher))}.</p>" if teacher else "") + "</section>")
    if line := teacher_tokens_line(data["teacher_tokens"]):
        parts.append(f"<p class=\"muted\">{_e(line)}</p>")
    return "".join(parts)


def _timeline(data: dict) -> str:
    spans = data["timeline"]
    head = "<h2 id=\"timeline\">Timeline</h2>"
    if not spans:
        return head + "<p>Only bootstrap has run.</p>"
    rows = "".join(f"<tr><td>{_e(s['label'])}</td><td>{_e(_ts(s['end']))}</td><td class=\"num\">{_e(s['note'])}</td></tr>"
                   for s in spans)
    return (head + "<p class=\"muted\">Each phase from the end of the one before to the time its result was recorded "
            "(run.json, hub_env.json, metrics.json); the --budget clock covers the iterations only.</p>"
            + timeline(spans) + f"<table><tr><th>phase</th><th>recorded</th><th>took</th></tr>{rows}</table>")


def render(data: dict) -> str:
    """The page's HTML."""
    body = "".join([_header(data), _verdict(data), _missing(data), _summary(data), _curves(data),
                    _weakness(data), _iterations(data), _timeline(data)])
    footer = (f"<p class=\"muted\" style=\"margin-top:32px\">Written by selfimprove on {_e(_ts(data['generated_at']))} "
              "from the run dir's files. Eval rows are sealed: the page holds only numeric aggregates of them.</p>")
    title = f"selfimprove report: {data['run']['dataset']}"
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<style>{CSS}</style></head><body><main>{body}{footer}</main></body></html>\n")


def write_report(rd: RunDir, table: dict[str, Any] | None, path: Path | None = None) -> Path:
    """Write the page (default R/report.html) atomically; return its path."""
    target = Path(path) if path is not None else rd.report_html
    atomic_write_text(target, render(collect(rd, table)))
    return target
