"""The eval examples on which Run A (targeted data) and Run C (real data, equal compute) disagree.

Eval rows are sealed from the TEACHER: while the loop runs, the teacher agent may read any file
of the run dir, report.html included. So this part is gathered only once the run is finalized
(run.json says so: finalize has run and no teacher turn remains; `compare --seeds N`, the one
command that reopens a run, gives the teacher none either). Before that it returns None and the
page holds no eval row's text.

Pairing: each arm's eval_summary.json lists per example its `example_id` and its correctness
(`per_example`, the sealed aggregation's output; the engine's row position stands in for a row
without an id, `phases.evals.read_sealed`). The two arms are paired on the ids both scored, and
an example flips when one arm is right (correct >= 0.5, the paired tests' rule) and the other is
not. For the shown examples only, the text (question, reference answer, each arm's completion) is
read from each arm's final eval file, at the path the tool builds from the arm's final step
(never the path a record names). Seed 0 of each arm is compared: the run's own Run A and Run C.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..engines.rollout_rows import train_rows
from ..errors import RunDirError
from ..models import RunConfig
from ..phases.analyze import completion_text, prompt_text
from ..rundir import RunDir

MAX_SHOWN = 10  # flipped examples shown per direction; the page says how many there are in all
RIGHT = 0.5  # correct >= this counts as right (stats.paired_comparison's rule)


def _texts(path: Path, wanted: set) -> dict[Any, dict[str, Any]]:
    """{example_id: {question, answer, completion}} of the first rollout of each wanted example in an eval
    file (seed rows or v1 Episode records, mapped by `train_rows`, which reads any rollout line's text)."""
    out: dict[Any, dict[str, Any]] = {}
    position = 0  # read_sealed's stand-in id for a row without one: its rollout's position in the file
    try:
        with open(path, "rb") as f:
            for line in f:
                if not line.strip() or len(out) == len(wanted):
                    continue
                try:
                    row = json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue
                for rollout in train_rows(row) if isinstance(row, dict) else []:
                    ex = rollout.get("example_id")
                    ex = position if ex is None else ex
                    position += 1
                    if ex in wanted and ex not in out:
                        out[ex] = {"question": prompt_text(rollout.get("prompt")), "answer": rollout.get("answer"),
                                   "completion": completion_text(rollout.get("completion"))}
    except OSError:
        return out
    return out


def flipped_examples(rd: RunDir, cfg: RunConfig) -> dict[str, Any] | None:
    """Run A vs Run C on their shared eval examples (None while the run is not finalized); {"note": why}
    when either arm has no readable eval summary."""
    if not cfg.finalized():
        return None
    arms = {key: rd.arm(key) for key in ("run_a", "run_c")}
    try:
        summaries = {key: rd.read_eval_summary(arm) for key, arm in arms.items()}
    except RunDirError as e:
        return {"note": f"not shown: {e}"}
    correct = {key: {e.example_id: e.correct for e in s.per_example} for key, s in summaries.items()}
    if not all(correct.values()):
        return {"note": "not shown: an eval summary holds no per-example results (an arm reused from --init-from)"}
    shared = [ex for ex in correct["run_a"] if ex in correct["run_c"]]
    a_right = [ex for ex in shared if correct["run_a"][ex] >= RIGHT > correct["run_c"][ex]]
    c_right = [ex for ex in shared if correct["run_c"][ex] >= RIGHT > correct["run_a"][ex]]
    wanted = set(a_right[:MAX_SHOWN] + c_right[:MAX_SHOWN])
    texts = {}
    for key, s in summaries.items():
        step = s.final_step
        texts[key] = _texts(arms[key].eval_file(step), wanted) if isinstance(step, int) else {}
    files = {key: rd.rel(arms[key].eval_file(s.final_step)) if isinstance(s.final_step, int) else None
             for key, s in summaries.items()}

    def example(ex: Any) -> dict[str, Any]:
        a, c = texts["run_a"].get(ex, {}), texts["run_c"].get(ex, {})
        return {"example_id": ex, "question": a.get("question") or c.get("question"),
                "answer": a.get("answer") if a.get("answer") is not None else c.get("answer"),
                "run_a": a.get("completion"), "run_c": c.get("completion"),
                "correct_a": correct["run_a"][ex], "correct_c": correct["run_c"][ex]}

    return {"n_a": len(correct["run_a"]), "n_c": len(correct["run_c"]), "n_shared": len(shared),
            "both_right": sum(correct["run_a"][ex] >= RIGHT and correct["run_c"][ex] >= RIGHT for ex in shared),
            "a_right": [example(ex) for ex in a_right[:MAX_SHOWN]], "n_a_right": len(a_right),
            "c_right": [example(ex) for ex in c_right[:MAX_SHOWN]], "n_c_right": len(c_right),
            "files": files,
            "steps": {key: s.final_step for key, s in summaries.items()}}
