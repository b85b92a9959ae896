"""What a finished run found, in words: did the targeted data beat equal compute, and which model to use.

The verdict (issue 23) is Run A (the best dataset from iter_0's checkpoint, with other training
seeds than the best iteration's) against Run C (the same steps from the same checkpoint on the
real train env, with Run A's seeds) under the test in force: Welch's t-test on per-seed
accuracies when both arms have >= 2 seeds, else the exact McNemar test of their seed-0
checkpoints (eval-sample noise only). Every summary opens with one of three sentences, then the
figures (Run A vs Run C, test, p, seeds, examples) and the model to use:

- DATA_BEAT: Run A beats Run C at p < 0.05;
- DATA_NOT_BEAT: it does not (a smaller gain, none, or one the test cannot tell from noise);
- DATA_UNTESTED: there is no Run C (compare --no-control, or its job failed).

The recommendation follows the verdict rather than contradicting it. When the data did not beat
equal compute, Run C is recommended over the arms trained on the data whenever it beats iter_0
itself (under the seed-aware test with seeds, above iter_0's eval_acc with one seed): the gain
is then had without the teacher's data. Otherwise the pick is as it always was: with several
seeds the arm with the highest mean among those that beat iter_0 under the seed-aware test at
p < 0.05 (none if no arm does); with one seed everywhere the highest eval_acc among the arms
scored on the most examples, provisional because seed variance is unmeasured, iter_0 itself
when no arm scores above it.
"""

from __future__ import annotations

from typing import Any

from ..stats import ALPHA, UNMEASURED

DATA_BEAT = "targeted data beat equal compute on real data"
DATA_NOT_BEAT = "targeted data did not beat equal compute on real data"
DATA_UNTESTED = "targeted data was not tested against equal compute on real data"


def _find(tests: list[dict], a: str, b: str) -> dict | None:
    return next((t for t in tests if (t.get("a"), t.get("b")) == (a, b)), None)


def data_vs_control(by_arm: dict[str, dict], seed_tests: list[dict], comparisons: list[dict], *,
                    run_c_failed: bool = False) -> dict[str, Any] | None:
    """Run A vs Run C under the test in force, as the verdict's figures; None without a Run A
    (no Phase 4 in this run: nothing was trained on the data from iter_0 to test)."""
    run_a, run_c = by_arm.get("run_a"), by_arm.get("run_c")
    if run_a is None:
        return None
    out: dict[str, Any] = {"data_beats_control": None, "test": None, "p": None, "mean_run_a": run_a["eval_acc"],
                           "mean_run_c": None, "delta": None, "n_seeds_run_a": run_a["n_seeds"],
                           "n_seeds_run_c": None, "n_examples": None}
    if run_c is None:
        why = ("run_c (real @iter0) failed, see the missing arms" if run_c_failed
               else "no run_c (real @iter0) in this run (compare --no-control)")
        return out | {"sentence": DATA_UNTESTED, "figures": why}
    n_a, n_c = run_a["n_seeds"], run_c["n_seeds"]
    out["n_seeds_run_c"] = n_c
    welch = _find(seed_tests, "run_a", "run_c")
    if n_a >= 2 and n_c >= 2 and welch is not None and welch.get("p") is not None:
        beats = welch["verdict"] == "improved"
        figures = (f"run_a {welch['mean_a']:.3f} vs run_c {welch['mean_b']:.3f} (delta {welch['delta']:+.3f}); "
                   f"Welch t-test p={welch['p']:.3g}; {n_a} vs {n_c} training seeds; "
                   f"{welch['n_examples']} shared eval examples")
        return out | _tested(beats, figures, "welch", welch["p"], welch["mean_a"], welch["mean_b"], welch["delta"],
                             welch["n_examples"])
    # Fewer than 2 seeds on a side (or every seed scored alike): the paired test of the seed-0 checkpoints.
    seeds = "1 training seed each" if n_a == n_c == 1 else f"seed 0 of each ({n_a} vs {n_c} training seeds)"
    why = (welch or {}).get("note") if n_a >= 2 and n_c >= 2 else None
    seeds += f", {why or UNMEASURED}"
    paired = _find(comparisons, "run_a", "run_c")
    if paired is None or paired.get("mcnemar_p") is None:
        return out | {"data_beats_control": False, "sentence": DATA_NOT_BEAT, "test": "mcnemar",
                      "figures": f"run_a vs run_c: no shared eval examples, untested ({seeds})"}
    beats = paired["verdict"] == "improved"
    figures = (f"run_a {paired['acc_a']:.3f} vs run_c {paired['acc_b']:.3f} (delta {paired['delta']:+.3f}); "
               f"exact McNemar p={paired['mcnemar_p']:.3g} ({paired['b_only_a']}/{paired['c_only_b']} "
               f"discordant); {seeds}; {paired['n_paired']} paired eval examples")
    return out | _tested(beats, figures, "mcnemar", paired["mcnemar_p"], paired["acc_a"], paired["acc_b"],
                         paired["delta"], paired["n_paired"])


def _tested(beats: bool, figures: str, test: str, p: float, mean_a: float, mean_c: float, delta: float,
            n_examples: int) -> dict[str, Any]:
    """The verdict's fields once a test has decided Run A vs Run C."""
    return {"data_beats_control": beats, "sentence": DATA_BEAT if beats else DATA_NOT_BEAT, "figures": figures,
            "test": test, "p": p, "mean_run_a": mean_a, "mean_run_c": mean_c, "delta": delta,
            "n_examples": n_examples}


def _not_from_data(label: str) -> str:
    """The recommendation's note when Run C is recommended over a higher arm trained on the data."""
    return f"; preferred over {label}: {DATA_NOT_BEAT}"


def recommend(rows: list[dict], seed_tests: list[dict], data_beats_control: bool | None) -> dict[str, Any] | None:
    """Which model to use, and how sure: "significant", "none" (seeds measured, nothing beats iter_0)
    or "provisional" (one seed everywhere: the top eval_acc, iter_0 itself when no arm scores above it).
    `data_beats_control` False (Run A did not beat Run C) prefers Run C when it beats iter_0 itself."""
    if not rows:
        return None
    by_arm = {r["arm"]: r for r in rows}
    control = by_arm.get("run_c")
    if not any(r["n_seeds"] >= 2 for r in rows):
        widest = max(r["n_eval"] for r in rows)  # like with like: the arms scored on the most examples
        top = max((r for r in rows if r["n_eval"] == widest), key=lambda r: (r["eval_acc"], r["eval_reward_mean"]))
        base = by_arm.get("iter_0")
        base = base if base is not None and base["n_eval"] == widest else None
        if base is not None and top["eval_acc"] <= base["eval_acc"]:
            top = base  # nothing scores above iter_0 (e.g. all 0.000): a reward-mean tie-break is no reason to switch
        note = ""
        if (data_beats_control is False and top["arm"] not in ("iter_0", "run_c") and control is not None
                and control["n_eval"] == widest and (base is None or control["eval_acc"] > base["eval_acc"])):
            note, top = _not_from_data(f"{top['arm']} ({top['eval_acc']:.3f})"), control
        return {"arm": top["arm"], "status": "provisional", "checkpoint": top["checkpoint"], "test": None,
                "text": f"{top['label']}: eval_acc {top['eval_acc']:.3f} on n={top['n_eval']} {top['eval_split']} "
                        f"examples, one training seed: provisional, {UNMEASURED}{note}"}
    wins = [t for t in seed_tests if t["b"] == "iter_0" and t["verdict"] == "improved"]
    if not wins:
        return {"arm": None, "status": "none", "checkpoint": None, "test": None,
                "text": f"no model recommended over iter_0: no arm beats it under the seed-aware t-test at "
                        f"p < {ALPHA} (see the seed-aware tests above); iter_0 stays the reference"}
    t = max(wins, key=lambda t: t["mean_a"])
    note = ""
    control_win = next((w for w in wins if w["a"] == "run_c"), None)
    if data_beats_control is False and control_win is not None and t is not control_win:
        note, t = _not_from_data(f"{t['a']} ({t['mean_a']:.3f})"), control_win
    row = by_arm[t["a"]]
    top = max(row["members"], key=lambda m: m["eval_acc"])  # the checkpoint to load: its best seed
    return {"arm": t["a"], "status": "significant", "checkpoint": top["checkpoint"], "test": t,
            "text": f"{row['label']}: {t['mean_a']:.3f} ± {t['sd_a']:.3f} over {t['n_a']} seeds vs iter_0 "
                    f"{t['mean_b']:.3f} on {t['n_examples']} shared {row['eval_split']} examples; one-sample "
                    f"t-test t={t['t']:.2f}, df={t['df']:.0f}, p={t['p']:.3g} < {ALPHA}; checkpoint: its best "
                    f"seed ({top['arm']}, {top['eval_acc']:.3f}){note}"}


def _figures_of(rec: dict, by_arm: dict[str, dict]) -> str:
    """The recommended arm's figures against iter_0, as the verdict's "use ..." clause gives them."""
    row = by_arm[rec["arm"]]
    if rec["status"] == "provisional":
        base = by_arm.get("iter_0")
        vs = f" vs iter_0 {base['eval_acc']:.3f}" if base is not None else ""
        return f"eval_acc {row['eval_acc']:.3f}{vs}, one training seed: provisional"
    t = rec["test"]
    return f"{t['mean_a']:.3f} over {t['n_a']} seeds vs iter_0 {t['mean_b']:.3f}, one-sample t-test p={t['p']:.3g}"


def _why(rec: dict, data_beats_control: bool | None, by_arm: dict[str, dict]) -> str:
    """Why the recommended arm (the verdict's "use ..." clause)."""
    figures = _figures_of(rec, by_arm)
    if data_beats_control is not False:
        return figures
    if rec["arm"] == "run_c":
        return f"the gain came from more steps on real data; the targeted data added nothing measurable ({figures})"
    return (f"{figures}; its gain is not shown to come from the data rather than from more steps "
            "(run_c does not beat iter_0 here)")


def verdict(data_test: dict[str, Any] | None, rec: dict[str, Any] | None, by_arm: dict[str, dict],
            no_signal: bool = False) -> dict[str, Any] | None:
    """The verdict for the summaries and the JSON result: `data_test` (from `data_vs_control`) plus the
    model to use, "use" (an arm key; None with no learning signal) and "use_line" (which and why)."""
    if data_test is None:
        return None
    beats = data_test["data_beats_control"]
    if no_signal:
        use, line = None, "use no model: iter_0 had no learning signal, so no figure here is evidence of learning"
    elif rec is None or rec["arm"] is None:
        use, line = "iter_0", "use iter_0 (real): no arm beats it under the seed-aware t-test"
    elif rec["arm"] == "iter_0":
        use, line = "iter_0", "use iter_0 (real): no arm scores above it (one training seed: provisional)"
    else:
        use = rec["arm"]
        line = f"use {by_arm[use]['label']}: {_why(rec, beats, by_arm)}"
    return data_test | {"use": use, "use_line": line}
