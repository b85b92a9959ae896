"""Phase 5, `finalize`: close the run and say honestly what it found.

Writes status/end_ts/total_duration_s, the final scratchpad summary, a PNG of
eval accuracy per arm, the report page (report.html), optional wandb runs, and
returns the table plus tests.

One table row per arm. An arm trained with several training seeds (compare
--seeds N: the best iteration, Run A, Run C) shows the mean over its seeds
± the sample sd, n_seeds, and a 95% t interval of that mean; a one-seed arm
shows its accuracy with the Wilson interval over eval examples.

Two kinds of test, because two kinds of noise:
- seed-aware (stats.compare_over_seeds): Welch's t-test on per-seed
  accuracies between two arms, or a one-sample t-test of an arm's seeds
  against iter_0 (one fixed checkpoint, the anchor every arm resumes from);
  accuracies are taken on the eval examples all the runs share. With fewer
  than 2 seeds on a side it says "seed variance unmeasured".
- paired per checkpoint (stats.compare_arms): exact McNemar on correctness
  and a paired bootstrap on reward, for seed 0 of each arm and for Run A vs
  Run C at every seed. It sees eval-sample noise only.

The verdict comes first in every summary (phases/verdict.py): did Run A (the
targeted data, seeds disjoint from the best iteration's) beat Run C (equal
compute on real data, Run A's seeds) under the test in force, in one of three
sentences ("targeted data beat / did not beat / was not tested against equal
compute on real data") with the figures, then the model to use and why.

The recommendation follows the verdict: with several seeds, the arm with the
highest mean among those that beat iter_0 under the seed-aware test at p < 0.05
(none if no arm does); with one seed everywhere, the highest eval_acc among the
arms scored on the most examples, labelled provisional because seed variance is
unmeasured. When the data did not beat equal compute, Run C is preferred
whenever it beats iter_0 itself.

A caveat printed with every table: BEST_ITER was chosen as the maximum of many
iterations on the same eval examples, which inflates its figure (winner's
curse). The Phase 4 arms, evaluated on the full split after the choice, are
the honest figures; Run A vs Run C is the equal-compute test of the data.

A summary never drops an arm silently. When Phase 4 is expected and an arm
has no record (its job died: run.json phase4_errors; or compare never got to
it), finalize writes a "## Partial summary" that names each missing arm, why,
and the command that recovers it (`compare --restart` for a dead job), leaves
the run open (no end_ts, status its end reason) and the CLI exits 6. The first
finalize that finds every arm writes the "## Final summary" and closes the run:
run.json status "finalized", end_reason how it ended (budget_exhausted, ...).
finalize on a closed run changes nothing and exits 5; `compare` adding seeds
reopens the run, and the next finalize replaces the "## Final summary".
"""


from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..faults import fault_point
from ..models import EvalSummary, IterRecord, Metrics, RunConfig
from ..report.table import comparison_lines, seed_test_lines, seeds_text, teacher_tokens_line
from ..rundir import RunDir, atomic_write_text, split_seed_key
from ..scratchpad import fenced, summary_sections, wrap_summary
from ..stats import compare_arms, compare_over_seeds, one_sample_t_test
from .arms import recorded_seed
from .compare import ARM_LABELS, seed_members
from .context import RunContext
from .evals import RULE_REWARD
from .order import require_phase_order
from .phase4_state import missing_phase4_arms, pick_best
from .signal import NO_SIGNAL_VERDICT
from .status import SHOWN_MISSING, missing_text
from .verdict import data_vs_control, recommend, verdict

NO_EVAL_SPLIT = "train (no eval split)"

SELECTION_CAVEAT = (
    "BEST_ITER is the maximum over {k} iteration(s) scored on the same {n} eval examples, so its own figure is "
    "optimistic; the Phase 4 arms (full eval split, run after the choice) are the honest figures, and "
    "run_a vs run_c is the equal-compute test of the targeted data."
)
UNMEASURED_CAVEAT = (
    "seed variance unmeasured: every arm was trained with one training seed, and retraining with another seed "
    "moves eval accuracy by amounts no test here can see, so the recommendation is provisional "
    "(`selfimprove compare --seeds 3` measures it)."
)
CONTROLS = ("run_a", "run_b", "run_c")
FINAL_HEADING = "## Final summary"
WORKED_LINE = "What worked / what didn't / open questions:"
WORKED_PLACEHOLDER = "_teacher: fill in from the iteration entries above._"
# `selfimprove run` answers the teacher's stops with a program (a teacher class or the LLM teacher), which
# writes no retrospective: its summary says so instead of leaving an instruction nobody will follow.
WORKED_BY_PROGRAM = ("_not written: `selfimprove run` drove this loop and its teacher writes no retrospective; "
                     "each iteration's entry above says what it targeted and what it scored._")


def _summary(rd: RunDir, key: str) -> EvalSummary | None:
    arm = rd.arm(key)
    return rd.read_eval_summary(arm) if arm.eval_summary.is_file() else None


def _relative(path: str | None, rd: RunDir) -> str | None:
    """A checkpoint path relative to the run dir, for tables a person reads."""
    if not path:
        return None
    where = rd.resolve(path)  # stored relative (or absolute in older run dirs)
    inside = rd.rel(where.resolve())
    return inside if not Path(inside).is_absolute() else str(where)


def _usable(path: str | None, rd: RunDir) -> str | None:
    """A stored checkpoint path as one a person can load from anywhere (absolute, current location)."""
    return str(rd.resolve(path)) if path else None


def _groups(metrics: Metrics) -> list[tuple[str, list[IterRecord]]]:
    """(arm, its finished seed members) in table order: iterations by index, then Runs A, B, C."""
    iters = sorted((r for r in metrics.iters if r.iter is not None), key=lambda r: r.iter)
    keys = [r.arm for r in iters] + list(CONTROLS)
    return [(key, members) for key in keys if (members := seed_members(metrics, key))]


def _row(ctx: RunContext, arm: str, members: list[IterRecord], best_arm: str | None) -> dict[str, Any]:
    rd = ctx.rd
    first = members[0]
    accs = [m.eval_acc for m in members]
    spread = one_sample_t_test(accs, 0.0)  # its mean, sd and 95% t interval of the mean (delta vs 0)
    if len(members) == 1:
        ci, ci_kind = list(first.acc_ci95), "Wilson 95% CI over eval examples"
    else:
        lo, hi = spread.ci95 or (spread.mean_a, spread.mean_a)  # all seeds equal: no spread to show
        ci, ci_kind = [max(0.0, lo), min(1.0, hi)], f"95% t interval of the mean over {len(members)} seeds"
    label = ARM_LABELS.get(arm, arm + (" (real)" if arm == "iter_0" else ""))
    # metrics.json stamps the seeds of the best iteration and the Phase 4 arms; the other iterations'
    # (the canonical seed) are read from their configs.
    seeds = [m.seed if m.seed is not None else recorded_seed(ctx, m.arm) for m in members]
    if arm == "run_b":
        data = f"real+{first.rows}" if first.rows else "real"
    else:
        data = str(first.rows) if first.rows else "real"
    return {
        "arm": arm, "label": label, "rows": data, "eval_acc": spread.mean_a, "eval_acc_sd": spread.sd_a,
        "n_seeds": len(members), "seeds": seeds, "acc_ci95": ci, "ci_kind": ci_kind,
        "n_eval": first.n_eval, "eval_reward_mean": sum(m.eval_reward_mean for m in members) / len(members),
        "checkpoint": _usable(first.checkpoint, rd), "checkpoint_rel": _relative(first.checkpoint, rd),
        "final_step": first.final_step, "eval_policy_step": first.eval_policy_step,
        "best": arm == best_arm, "eval_split": first.eval_split,
        "members": [{"arm": m.arm, "seed": seed, "eval_acc": m.eval_acc, "acc_ci95": list(m.acc_ci95),
                     "n_eval": m.n_eval, "checkpoint": _usable(m.checkpoint, rd), "checkpoint_rel": _relative(m.checkpoint, rd)}
                    for m, seed in zip(members, seeds)],
    }


def _paired_tests(rd: RunDir, best_arm: str | None, groups: dict[str, list[IterRecord]]) -> list[dict]:
    """McNemar + bootstrap per checkpoint pair: seed 0 of each arm, and Run A vs Run C at every seed."""
    pairs = [(best_arm, "iter_0"), (best_arm, "run_c"), ("run_a", "run_c"), ("run_a", best_arm), ("run_b", "run_c")]
    run_c_by_seed = {split_seed_key(m.arm)[1]: m.arm for m in groups.get("run_c", [])}
    pairs += [(m.arm, run_c_by_seed[k]) for m in groups.get("run_a", [])
              if (k := split_seed_key(m.arm)[1]) >= 1 and k in run_c_by_seed]
    out = []
    for a, b in pairs:
        if a and b and (sa := _summary(rd, a)) and (sb := _summary(rd, b)):
            out.append(compare_arms(sa, sb))
    return out


def _seed_tests(rd: RunDir, best_arm: str | None, groups: dict[str, list[IterRecord]]) -> list[dict]:
    """Seed-aware tests: the headline pairs, then each arm against iter_0 (which the recommendation reads)."""
    pairs = [(best_arm, "iter_0"), (best_arm, "run_c"), ("run_a", "run_c"), ("run_a", best_arm), ("run_b", "run_c"),
             ("run_a", "iter_0"), ("run_c", "iter_0"), ("run_b", "iter_0")]
    out, seen = [], set()
    for a, b in pairs:
        if not a or not b or (a, b) in seen or a not in groups or b not in groups:
            continue
        seen.add((a, b))
        sa = [s for m in groups[a] if (s := _summary(rd, m.arm))]
        sb = [s for m in groups[b][:1 if b == "iter_0" else None] if (s := _summary(rd, m.arm))]
        if sa and sb:
            out.append(compare_over_seeds(sa, sb, b_fixed=b == "iter_0", a_name=a, b_name=b))
    return out


def build_table(ctx: RunContext) -> dict[str, Any]:
    rd = ctx.rd
    metrics = rd.read_metrics()
    best = pick_best(metrics.iters)
    best_arm = f"iter_{best.iter}" if best else None
    ordered = _groups(metrics)
    groups = dict(ordered)
    rows = [_row(ctx, arm, members, best_arm) for arm, members in ordered]
    by_arm = {r["arm"]: r for r in rows}
    seed_tests = _seed_tests(rd, best_arm, groups)
    comparisons = _paired_tests(rd, best_arm, groups)
    run_c_failed = any(split_seed_key(e.arm)[0] == "run_c" for e in ctx.cfg.phase4_errors)
    data_test = data_vs_control(by_arm, seed_tests, comparisons, run_c_failed=run_c_failed)
    recommendation = recommend(rows, seed_tests, data_test["data_beats_control"] if data_test else None)
    n_iters = len([r for r in metrics.iters if r.iter and r.iter >= 1])
    caveat = SELECTION_CAVEAT.format(k=n_iters, n=best.n_eval if best else 0) if best else None
    if caveat and n_iters > 1 and len(groups.get(best_arm, [])) > 1:
        caveat += (f" {best_arm}'s seed 0 is that selected run, so its mean over seeds leans optimistic too; "
                   "its other seeds and Run A's are free of the selection.")
    hub = ctx.introspected_hub()
    if hub is not None and hub.eval_size is None:  # verifiers scored every arm on its first train rows
        for r in rows:
            r["eval_split"] = NO_EVAL_SPLIT
        if caveat:
            caveat = caveat.replace("full eval split", f"{NO_EVAL_SPLIT}, {hub.evaluated_rows or 'the first train rows'}")
    no_signal = _no_signal(ctx.cfg)
    if no_signal:  # the run went on with --allow-no-signal: nothing below measures learning
        recommendation = {"arm": None, "status": "none", "checkpoint": None, "test": None,
                          "text": f"no model recommended: {no_signal}"}
    measured = any(r["n_seeds"] >= 2 for r in rows)
    return {"verdict": verdict(data_test, recommendation, by_arm, no_signal=bool(no_signal)),
            "rows": rows, "best": best_arm, "recommended": recommendation["arm"] if recommendation else None,
            "recommendation": recommendation, "seeds_measured": measured, "seed_tests": seed_tests,
            "comparisons": comparisons, "caveat": caveat,
            "seed_caveat": None if measured else UNMEASURED_CAVEAT, "no_signal": no_signal,
            "accuracy_rule": _accuracy_rule(rd), "teacher_tokens": dict(ctx.cfg.teacher_tokens)}


def report_table(rd: RunDir) -> dict[str, Any] | None:
    """The table for the report page of a run at any stage: build_table over the arms recorded so far
    (None before any arm is). Read-only: no lock, nothing closed or written."""
    if not rd.metrics_json.is_file() or not rd.read_metrics().iters:
        return None
    return build_table(RunContext.load(rd))


def _no_signal(cfg: RunConfig) -> str | None:
    """The no-signal verdict when iter_0 had no reward spread (phases/signal.py), else None."""
    signal = cfg.learning_signal or {}
    if signal and not signal.get("has_signal", True):
        return (f"{NO_SIGNAL_VERDICT} (iter_0: {signal.get('train_groups_with_spread')}/{signal.get('train_groups')} "
                f"train prompt groups with any reward spread, mean group reward sd {signal.get('train_mean_group_reward_sd')}; "
                "continued with --allow-no-signal, so no figure of this run "
                "is evidence of learning)")
    return None


def _accuracy_rule(rd: RunDir) -> str | None:
    """Says what eval_acc means when the env has no is_correct metric: a threshold on the reward."""
    summary = _summary(rd, "iter_0")
    # On a 0/1 reward the threshold IS exact correctness (each example's reward mean equals its share of
    # rollouts judged correct): the note would only be noise in the summary.
    binary = summary is not None and bool(summary.per_example) and all(
        abs(e.reward - e.correct) < 1e-9 for e in summary.per_example)
    if summary is not None and summary.correct_rule == RULE_REWARD and not binary:
        return ("eval_acc = share of eval examples with reward >= 0.5: the env's rubric reports no is_correct "
                "metric, so on a continuous reward this is a threshold, not exact correctness (see eval_reward_mean)")
    return None


def eval_policy_note(rows: list[dict]) -> str | None:
    """Which policy each arm's final eval scored, when it is not the final checkpoint's: prime-rl main
    evaluates step max_steps right after batch max_steps-1 ships (orchestrator.py:690 and 759), on the
    policy inference holds, so eval_acc measures v{<= max_steps-1} while the checkpoint column is v{max_steps}."""
    off = [f"{r['arm']} scored v{r['eval_policy_step']} (checkpoint v{r['final_step']})" for r in rows
           if r.get("eval_policy_step") is not None and r.get("final_step") is not None
           and r["eval_policy_step"] != r["final_step"]]
    if not off:
        return None
    return ("the final eval is not the final checkpoint's (prime-rl main evaluates max_steps before its last "
            "train step): " + "; ".join(off))


def _final_scratchpad(rd: RunDir, table: dict, phase4_errors: list, worked: str = WORKED_PLACEHOLDER) -> str:
    ts = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [f"{FINAL_HEADING} — {ts}", ""]
    if table.get("no_signal"):
        lines += [f"**NOT A RESULT: {table['no_signal']}**", ""]
    if v := table.get("verdict"):  # the answer first: did the targeted data beat equal compute?
        lines += [f"**{v['sentence']}**: {v['figures']}.", f"{v['use_line']}.", ""]
    lines += ["| arm | rows | eval_acc (mean ± sd over seeds) | training seed ids | 95% CI | n eval examples (split) | checkpoint (in the run dir) |",
              "|---|---|---|---|---|---|---|"]
    for r in table["rows"]:
        mark = " **<- best**" if r["best"] else ""
        sd = f" ± {r['eval_acc_sd']:.3f}" if r["eval_acc_sd"] is not None else ""
        lines.append(f"| {r['label']}{mark} | {r['rows']} | {r['eval_acc']:.3f}{sd} | {seeds_text(r['seeds'])} | "
                     f"[{r['acc_ci95'][0]:.3f}, {r['acc_ci95'][1]:.3f}] | {r['n_eval']} ({r['eval_split']}) | "
                     f"`{r['checkpoint_rel']}` |")
    lines += ["", "Seed-aware tests (Welch t-test between arms, one-sample t-test against iter_0, two-sided, on "
              "per-seed accuracies over the eval examples all runs share):"]
    lines += [f"- {line}" for line in seed_test_lines(table["seed_tests"])]
    lines += ["", "Paired tests per checkpoint (exact McNemar; eval-sample noise only):"]
    lines += [f"- {line}" for line in comparison_lines(table["comparisons"])]
    if phase4_errors:
        lines.append("\nPhase 4 arms that failed (not in the table): "
                     + "; ".join(f"{e.arm}: {e.error}" for e in phase4_errors))
    if table.get("accuracy_rule"):
        lines.append(f"\nNote: {table['accuracy_rule']}")
    if note := eval_policy_note(table["rows"]):
        lines.append(f"\nNote: {note}")
    rec = table["recommendation"]
    if rec:
        lines.append(f"\nRecommendation ({rec['status']}): {rec['text']}")
    if table["seed_caveat"]:
        lines.append(f"\nCaveat: {table['seed_caveat']}")
    if table["best"]:
        it = int(table["best"].split("_")[1])
        report = rd.iter(it).dir / "weakness_report.md"
        lines.append(f"\nWinning iteration: {table['best']}; its buckets are in `{report}` (section 2 of its entry above).")
    if table["caveat"]:
        lines.append(f"\nCaveat: {table['caveat']}")
    if tokens := teacher_tokens_line(table.get("teacher_tokens") or {}):
        lines.append(f"\n{tokens}")
    lines.append(f"\n{WORKED_LINE} {worked}")
    return "\n".join(lines) + "\n"


def _missing_line(missing: list[dict]) -> str:
    return f"INCOMPLETE: the Phase 4 arm(s) {missing_text(missing, why=False)} are missing from this summary"


def _partial_scratchpad(rd: RunDir, table: dict, missing: list[dict]) -> str:
    """A partial summary: what is finished, what is missing and why, and how to recover. The final
    summary is written by the first finalize that finds every Phase 4 arm."""
    final = _final_scratchpad(rd, table, [])
    body = final.split("\n", 1)[1]  # the table and tests, without the "## Final summary" heading
    ts = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [f"## Partial summary — {ts}", "", f"**{_missing_line(missing)}**; the table below is not the final one:"]
    lines += [f"- {m['arm']}: {m['why']}; recover with `{m['fix']}`, then `selfimprove finalize --run-dir {rd.root}`"
              for m in missing[:SHOWN_MISSING]]
    if len(missing) > SHOWN_MISSING:  # bounded: --seeds N misses up to 3N arms
        lines.append(f"- {missing_text(missing[SHOWN_MISSING:], why=False)}: recover with `{missing[0]['fix']}`")
    return "\n".join(lines) + "\n" + body


def incomplete_message(result: dict[str, Any]) -> str | None:
    """One line for the CLI edge when the summary lacks Phase 4 arms (None when complete)."""
    missing = result.get("missing_arms") or []
    if not missing:
        return None
    parts = missing_text(missing)
    return (f"{result['run_dir']}/run.json: the summary is incomplete, missing {parts}; recover with "
            f"`{missing[0]['fix']}`, then re-run `selfimprove finalize --run-dir {result['run_dir']}`")


PARTIAL_HEADING = "## Partial summary"


def replace_final_summary(pad: str, summary: str) -> str:
    """scratchpad.md with its summary replaced by `summary` (appended when there is none), written
    between the tool's marker lines (`scratchpad.summary_sections`: never found by a heading, which a
    teacher can also write).

    One summary at a time (issue 36): every summary goes, and the new one (final or partial) takes the
    first one's place. A finalize after more seeds must not leave the old summary's provisional
    recommendation standing, nor an INCOMPLETE partial summary below a final one. What the teacher
    wrote under an old summary's "What worked" line is carried over (fenced), not lost."""
    sections = summary_sections(pad)
    if not sections:  # no summary yet: append it
        sep = "" if not pad or pad.endswith("\n\n") else ("\n" if pad.endswith("\n") else "\n\n")
        return pad + sep + wrap_summary(summary)
    for _start, _end, body_start, body_end in reversed(sections):  # the teacher's latest words
        old = pad[body_start:body_end]
        teacher = old.split(WORKED_LINE, 1)[1].strip() if WORKED_LINE in old else ""
        if teacher and teacher != WORKED_PLACEHOLDER:
            summary = summary.replace(f"{WORKED_LINE} {WORKED_PLACEHOLDER}", f"{WORKED_LINE} {fenced(teacher)}")
            break
    kept, pos = [], 0
    for start, end, _b, _e in sections:
        kept.append(pad[pos:start])
        pos = end
    first = sections[0][0]
    before, after = pad[:first], "".join(kept[1:]) + pad[pos:]
    return before + wrap_summary(summary) + ("\n" + after if after.strip() else "")


def finalize(rd: RunDir, *, plot: bool = True, wandb: bool = True, worked: str = WORKED_PLACEHOLDER) -> dict[str, Any]:
    """Close the run and summarise it. A closed run raises PhaseOrderError (exit 5) with nothing written.
    `worked`: the summary's last line until a teacher replaces it (the placeholder asks an agent to)."""
    rd.require()
    require_phase_order(RunContext.load(rd), "finalize")
    with rd.lock("finalize"):
        ctx = RunContext.load(rd)
        require_phase_order(ctx, "finalize")  # again under the lock: another finalize may have closed it
        cfg = ctx.cfg  # written below as the run closes (or reopens); build_table reads nothing it changes
        missing = missing_phase4_arms(rd, cfg)
        if missing:  # the run stays open (no end_ts, its end reason as status) until the arms are recovered
            if cfg.finalized() or cfg.total_duration_s is not None:  # closed before compare added arms
                cfg.reopen()
                rd.write_run(cfg)
        fault_point("finalize")
        table = build_table(ctx)
        pad = rd.read_scratchpad()
        if missing:  # the partial summary replaces any summary before it (a Final one would now be wrong)
            atomic_write_text(rd.scratchpad, replace_final_summary(pad, _partial_scratchpad(rd, table, missing)))
        else:
            # The summary before the close: a kill in between re-runs finalize, which rewrites it.
            atomic_write_text(rd.scratchpad, replace_final_summary(pad, _final_scratchpad(rd, table, cfg.phase4_errors, worked)))
            if cfg.status == "running":
                cfg.status, cfg.reason = "completed", cfg.reason or "finalized"
            cfg.end_reason, cfg.status = cfg.ended_as(), "finalized"
            cfg.end_ts = cfg.end_ts or time.time()  # an abort's end (introspect records it) stays
            cfg.total_duration_s = round(cfg.end_ts - cfg.start_ts, 1)
            rd.write_run(cfg)
        notes, plotted = [], None
        if plot and table["rows"]:
            try:
                from ..report.plot import plot_eval_acc

                plot_eval_acc(table["rows"], rd.plot_png, f"{cfg.dataset}: eval accuracy per arm ({cfg.model})")
                plotted = str(rd.plot_png)
            except Exception as e:  # a missing matplotlib must not lose the summary
                notes.append(f"plot skipped: {str(e).splitlines()[0]}")
        try:  # the report page: written after the close, so it shows the run as finalize leaves it
            from ..report.page import write_report

            report = str(write_report(rd, table))
        except Exception as e:  # noqa: BLE001  (a page that cannot be written must not lose the summary)
            report = None
            notes.append(f"report.html not written: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        if wandb and cfg.wandb_project and table["rows"]:
            from ..report.wandb_log import log_arms_to_wandb

            notes.append(log_arms_to_wandb(cfg.wandb_project, cfg.dataset, table["rows"],
                                           json.loads(cfg.model_dump_json()), table["rows"]))
        return {"run_dir": str(rd.root), "status": cfg.status, "end_reason": cfg.ended_as(), "reason": cfg.reason,
                "end_ts": cfg.end_ts, "total_duration_s": cfg.total_duration_s, "seeds": cfg.seeds, **table,
                "complete": not missing, "missing_arms": missing, "plot": plotted, "report": report, "notes": notes,
                "phase4_errors": [e.model_dump(mode="json") for e in cfg.phase4_errors]}
