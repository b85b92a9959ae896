"""The report page's per-iteration parts: what the teacher planned (buckets), what the gates said on
each attempt, how many of the LLM teacher's replies were refused, its tokens; and the weakness
groups' solve rates.

Everything here is read from files Phase 3 already wrote (weakness_report.md's front matter,
report_gate.json, generate.json, gate_report.json, gate_attempts.json, record.json, llm_teacher/ statuses,
weakness_stats.json), the tool's records through their models (report/records.py: one that fails
is a line in the entry's `problems`, never a crash); weakness statistics not cached by `iterate` are computed with the same
function (`phases.analyze.arm_weakness`), from TRAIN rollouts only.
"""

from __future__ import annotations

from typing import Any

from ..gates.report import parse_weakness_report
from ..grouping import load_group_fn
from ..llm_teacher.api import Transcripts
from ..models import Metrics, RunConfig
from ..phases.analyze import arm_weakness, sealed_train_ids
from ..errors import RunDirError
from ..rundir import RunDir, read_json_object
from .samples import iteration_samples
from .records import Attempts, Bad, Generated, GateRecord, IterationRecord, WeaknessStats, as_dict, read_record

TOP_GROUPS = 12  # real prompt groups shown, weakest first (the order weakness_stats sorts them in)
TOP_OWN_GROUPS = 6  # groups of an iteration's own generated rows
REFUSED = ("failed", "unusable")  # llm_teacher exchange statuses whose files were not kept


def _stage(it_dir, has_record: bool) -> str:
    """Where an unfinished iteration stopped, from the artefact each step leaves (phases/iterate.py)."""
    if has_record:
        return "done"
    gate = read_json_object(it_dir / "gate_report.json")
    if (it_dir / "eval_summary.json").is_file():
        return "trained; its record is not written yet (re-run `selfimprove iterate`)"
    if gate and gate.get("passed"):
        return "gates passed; packaging or training not finished"
    if gate is not None:
        return "stopped: the dataset gate failed (the teacher fixes gen_dataset.py)"
    report_gate = read_json_object(it_dir / "report_gate.json")
    if report_gate is not None and not report_gate.get("passed"):
        return "stopped: the report gate failed (the teacher fixes weakness_report.md)"
    if (it_dir / "skeletons.json").is_file():
        return "waiting for the teacher's weakness_report.md and gen_dataset.py"
    return "not started"


def _gate(record: GateRecord | Bad | None, problems: list[str]) -> dict[str, Any] | None:
    if isinstance(record, Bad):
        problems.append(record.line)
        return {"passed": False, "failures": [record.line], "checks": []}
    if record is None:
        return None
    return {"passed": record.passed, "failures": [f"[{f.rule}] {f.message}" for f in record.failures],
            "checks": sorted(record.stats)}


def _valid(record: Any, problems: list[str]) -> dict:
    """A record's fields as a dict ({} when missing or invalid; an invalid one's line goes to `problems`)."""
    if isinstance(record, Bad):
        problems.append(record.line)
    return as_dict(record) or {}


def _buckets(it_dir, report_gate: dict | None) -> dict[str, Any]:
    """The buckets of weakness_report.md's front matter once the teacher submitted it to the report gate
    (before that the file is the tool's skeleton, its placeholders no plan)."""
    path = it_dir / "weakness_report.md"
    if not path.is_file() or report_gate is None:
        return {"buckets": [], "note": "the teacher has not submitted weakness_report.md yet"}
    parsed = parse_weakness_report(path)
    if not hasattr(parsed, "buckets"):  # a GateReport: the front matter does not parse or validate
        return {"buckets": [], "note": "weakness_report.md's front matter is not valid yet (see report_gate.json)"}
    severity = {d.label: d.severity for d in parsed.domains}
    # the "failure mode" column is the teacher's own words for what goes wrong (SubDomain.failure_mode),
    # not the sub_domain label rows are tagged with (the page showed the label under that heading)
    mode = {(d.label, s.label): s.failure_mode for d in parsed.domains for s in d.sub_domains}
    return {"buckets": [{"domain": b.domain, "sub_domain": b.sub_domain, "rows": b.rows,
                         "severity": severity.get(b.domain), "failure_mode": mode.get((b.domain, b.sub_domain))}
                        for b in parsed.buckets],
            "note": None if report_gate.get("passed") else "a draft: it failed the report gate"}


def _llm_exchanges(it_dir) -> dict[str, Any] | None:
    """How many replies the LLM teacher sent for this iteration and how many were refused (None: no LLM teacher)."""
    transcripts = Transcripts(it_dir)
    if not transcripts.paths():
        return None
    statuses = [str(e.get("status")) for e in transcripts.all()]
    return {"replies": len(statuses), "refused": sum(s in REFUSED for s in statuses)}


def iteration_parts(rd: RunDir, cfg: RunConfig, metrics: Metrics) -> list[dict[str, Any]]:
    """One entry per iteration directory (iter_1, iter_2, ...), finished or not."""
    out = []
    for n in rd.iter_indices():
        if n < 1:
            continue
        it_dir = rd.iter(n).dir
        problems: list[str] = []  # the tool's records here that fail their model, one line each
        record = read_record(it_dir / "record.json", IterationRecord)
        fields = _valid(record, problems)
        generated = _valid(read_record(it_dir / "generate.json", Generated), problems)
        attempts = _valid(read_record(it_dir / "gate_attempts.json", Attempts), problems).get("attempts") or []
        rec = metrics.get(f"iter_{n}")
        report_gate = read_record(it_dir / "report_gate.json", GateRecord)
        out.append({
            "n": n, "stage": _stage(it_dir, isinstance(record, IterationRecord)),
            "eval_acc": rec.eval_acc if rec else None, "acc_ci95": list(rec.acc_ci95) if rec else None,
            "n_eval": rec.n_eval if rec else None,
            "verdict": fields.get("verdict"), "delta_vs_prev": fields.get("delta_vs_prev"),
            "vs_iter0": fields.get("vs_iter0"),
            "rows": generated.get("rows"), "rows_dropped_eval_overlap": generated.get("rows_dropped_eval_overlap"),
            **_buckets(it_dir, _valid(report_gate, []) if report_gate is not None else None),
            "report_gate": _gate(report_gate, problems),
            "dataset_gate": _gate(read_record(it_dir / "gate_report.json", GateRecord), problems),
            "attempts": attempts,
            "llm": _llm_exchanges(it_dir),
            "teacher_tokens": cfg.teacher_tokens.get(f"iter_{n}"),
            "samples": iteration_samples(it_dir, report_gate is not None),
            "problems": problems,
        })
    return out


class BadStats(Exception):
    """A weakness_stats.json that fails its model; its message is the page's line for it."""


def _saved(rd: RunDir, n: int) -> dict:
    """iter_n/weakness_stats.json's figures ({} when it does not exist); BadStats when it fails its model."""
    saved = read_record(rd.iter(n).dir / "weakness_stats.json", WeaknessStats)
    if isinstance(saved, Bad):
        raise BadStats(saved.line)
    return as_dict(saved) or {}


def _cached(rd: RunDir, key: str) -> dict | None:
    """weakness_stats.json figures `iterate` already computed: iter_0's ("real", in any iteration's file,
    the same whole-run window) or iter_N's own rows ("previous" in iter_{N+1}'s file)."""
    if key == "iter_0":
        for n in sorted(rd.iter_indices(), reverse=True):
            saved = _saved(rd, n)
            if saved.get("real"):
                return saved["real"]
        return None
    if key.startswith("iter_") and key[5:].isdigit():
        return _saved(rd, int(key[5:]) + 1).get("previous")
    return None


def _stats(rd: RunDir, metrics: Metrics, key: str, label: str, sealed: frozenset, group_by: str | None) -> dict | None:
    """An arm's weakness statistics, grouped by the run's rule (run.json group_by, as `iterate` used it)."""
    record = metrics.get(key)
    if record is None:
        return None
    group_of = load_group_fn(group_by) if group_by and ":" in group_by else None
    stats = _cached(rd, key) or arm_weakness(rd.arm(key), record.final_step, label=label, sealed=sealed,
                                             group_of=group_of, grouping=group_by or "auto")
    return stats if stats.get("groups") else None


def _brief(stats: dict, top: int) -> dict[str, Any]:
    w = stats["window"]
    g = stats["grouping"]
    # the rule, its fallback note and whether even it is degenerate, so the page can say what the groups mean;
    # per group the guessing prior beside the solve rate and the collapse flag (older files lack them: None)
    return {"window": w, "by_class": stats["by_class"], "n_groups": g["groups"],
            "grouping": {k: g.get(k) for k in ("name", "rule", "note", "degenerate", "singleton_share")},
            "groups": [{**{k: x[k] for k in ("group", "prompts", "rollouts", "solve_rate", "solve_rate_ci95", "class")},
                        "guess_prior": x.get("guess_prior"), "collapse_suspect": x.get("collapse_suspect")}
                       for x in stats["groups"][:top]]}


def weakness_parts(rd: RunDir, metrics: Metrics, group_by: str | None = None) -> dict[str, Any] | None:
    """The real env's prompt groups (iter_0, then the Phase 4 arms trained on real data where they saw
    the group), and each arm trained on generated rows over its own rows' groups; {"error": line}
    when a weakness_stats.json fails its model (the page shows the line in place of the section)."""
    if metrics.get("iter_0") is None:
        return None
    try:
        return _weakness_parts(rd, metrics, group_by)
    except BadStats as e:
        return {"error": str(e)}
    except RunDirError as e:  # a damaged hub_env.json: which train rows are sealed is unknown, so none is shown
        return {"error": f"{e} (the weakness groups are not shown while it is unreadable)"}


def _weakness_parts(rd: RunDir, metrics: Metrics, group_by: str | None) -> dict[str, Any] | None:
    sealed = sealed_train_ids(rd) if rd.hub_env_json.is_file() else frozenset()
    real = _stats(rd, metrics, "iter_0", "the real env's train split", sealed, group_by)
    if real is None:
        return None
    shown = _brief(real, TOP_GROUPS)
    columns = []
    for key, label in (("run_c", "run_c (real data)"), ("run_b", "run_b (real + generated)")):
        other = _stats(rd, metrics, key, label, sealed, group_by)
        if other is None:
            continue
        by_group = {g["group"]: g for g in other["groups"]}
        columns.append({"arm": key, "label": label, "window": other["window"],
                        "rates": {g["group"]: by_group.get(g["group"]) and by_group[g["group"]]["solve_rate"]
                                  for g in shown["groups"]}})
    own = []
    keys = [r.arm for r in sorted((r for r in metrics.iters if r.iter and r.replicate_of is None), key=lambda r: r.iter)]
    for key in keys + ["run_a"]:
        stats = _stats(rd, metrics, key, f"{key}'s generated rows", frozenset(), group_by)
        if stats is not None:
            own.append({"arm": key, **_brief(stats, TOP_OWN_GROUPS)})
    return {"real": shown, "columns": columns, "own": own}
