"""Render scratchpad.md entries (plain functions from run-dir data to markdown).

Phases append what these return with `RunDir.append_scratchpad`. Each entry
starts with an HTML comment marker, so a phase that re-runs after a kill can
tell whether its entry is already there (`has_entry`) and never writes it twice.
Only aggregates of eval rows ever appear here (the scratchpad is the teacher's
reading, and eval rows are sealed); train trajectories come from train rollouts.

The pre-iteration entry (3a.5) holds placeholders in the sections the teacher
writes (TEACHER_SECTIONS) and, once the iteration is recorded, in its "what
worked" line (WORKED_PLACEHOLDER). The report gate refuses to go on while any
of them stays (`unfilled_teacher_sections`); teachers fill them with
`fill_teacher_sections` (or by editing the file).

The notebook's structure is the tool's, not the text's (issue 41): a teacher writes headings
freely ("## Final summary of my plan" once made finalize erase 2,009 characters of an iteration).
So the tool finds its own parts by marker lines it owns, never by headings: an iteration entry
starts at its `<!-- selfimprove:iter_N -->` line, the summary lies between the lines
SUMMARY_BEGIN and SUMMARY_END. Teacher text the tool writes into the file goes through `fenced`,
which turns the tool's marker prefix into a plain comment, so it cannot open a tool section.

Migration rule for run dirs written before the markers: a scratchpad with no marker for a part
is read by the heading the tool wrote there: an iteration entry by `## Iteration 2 — ` (the
em-dash the tool writes) above the first `<!-- selfimprove:iter_N -->` line (N >= 1; below it the
text is the teacher's), the summary by `## Final summary — <UTC stamp>` or `## Partial summary —
<UTC stamp>` exactly, never by a heading that merely starts with the same words, while the file
holds no summary marker. The next finalize rewrites that summary with its markers.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

from pathlib import Path

from .models import EvalSummary
from .rundir import atomic_write_text

# Section number -> (heading, placeholder) of the sections the teacher writes in "## Iteration N".
TEACHER_SECTIONS = {
    1: ("Understanding from traces", "_teacher: what the failed train rollouts show (cite prompts by step/idx)._"),
    3: ("Plan for the data", "_teacher: templates, diversity axes, what is reused from earlier iterations._"),
    4: ("Hyperparameter / reward changes + rationale", "_teacher: none, or the keys in overrides.toml and why._"),
}
# Section 5's last line, written at record; the teacher fills it before the next iteration.
WORKED_PLACEHOLDER = "_teacher: fill in before the next iteration._"


TOOL_MARK = "<!-- selfimprove:"  # every marker starts so; only the tool writes it (`fenced`)
SUMMARY_BEGIN = "<!-- selfimprove:summary begin -->"
SUMMARY_END = "<!-- selfimprove:summary end -->"
_STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
_ITER_MARKERS = re.compile(r"(?m)^<!-- selfimprove:iter_[1-9][0-9]* -->[ \t]*$")
_LEGACY_SUMMARY = re.compile(rf"(?m)^## (?:Final|Partial) summary — {_STAMP}$")  # before the markers


def marker(key: str) -> str:
    """The invisible tag an entry carries, e.g. `<!-- selfimprove:iter_0 -->`."""
    return f"<!-- selfimprove:{key} -->"


def fenced(text: str) -> str:
    """Teacher text as the tool writes it into the scratchpad: the tool's marker prefix becomes a
    plain comment (`<!-- quoted selfimprove: ...`), so the text cannot open or close a tool section."""
    return text.replace(TOOL_MARK, "<!-- quoted selfimprove:")


def _marker_line(text: str, line: str, start: int = 0, end: int | None = None) -> int:
    """Where `line` stands alone on a line of text[start:end] (-1 when it does not): a marker quoted
    inside a sentence is not one."""
    m = re.compile(rf"(?m)^{re.escape(line)}[ \t]*$").search(text, start, len(text) if end is None else end)
    return m.start() if m else -1


def summary_sections(pad: str) -> list[tuple[int, int, int, int]]:
    """(start, end, body_start, body_end) of every summary in scratchpad.md, in order: [start, end)
    is the whole section with its markers, [body_start, body_end) the summary text inside them.

    With markers, each SUMMARY_END line closes the section opened by the nearest SUMMARY_BEGIN line
    before it (a stray begin line above is not part of it). Without any (a run dir written before
    them), a section starts at the tool's own stamped heading and runs to the next level-2 heading,
    marker line or the end."""
    out: list[tuple[int, int, int, int]] = []
    if _marker_line(pad, SUMMARY_BEGIN) >= 0 or _marker_line(pad, SUMMARY_END) >= 0:
        pos = 0
        while (close := _marker_line(pad, SUMMARY_END, pos)) >= 0:
            opens = [m.start() for m in re.finditer(rf"(?m)^{re.escape(SUMMARY_BEGIN)}[ \t]*$", pad[:close])
                     if m.start() >= pos]
            nl = pad.find("\n", close)
            end = len(pad) if nl < 0 else nl + 1
            if opens:
                start = opens[-1]
                body = pad.find("\n", start) + 1
                out.append((start, end, body, close))
            pos = end
        return out
    for m in _LEGACY_SUMMARY.finditer(pad):
        nxt = [i for i in (pad.find("\n## ", m.start() + 1), pad.find("\n" + TOOL_MARK, m.start() + 1)) if i >= 0]
        end = min(nxt) + 1 if nxt else len(pad)
        out.append((m.start(), end, m.start(), end))
    return out


def wrap_summary(summary: str) -> str:
    """A summary as the tool writes it: between its marker lines."""
    return f"{SUMMARY_BEGIN}\n{summary.rstrip()}\n{SUMMARY_END}\n"


_ENV_LINE = re.compile(r"(?m)^- real environment: .*$")


def real_env_line(hub_id: str, env_args: dict) -> str:
    """The header's line naming the real env and the args it is loaded with (bootstrap writes it,
    introspect rewrites it when --env-args or --hub-id change them)."""
    return f"- real environment: `{hub_id}` (env args: `{json.dumps(env_args)}`)"


def with_env_line(text: str, line: str) -> str:
    """`text` (scratchpad.md) with its header's real-environment line replaced by `line`; the
    first such line only (the header's), and `text` unchanged when it has none."""
    return _ENV_LINE.sub(lambda _m: line, text, count=1)


def has_entry(text: str, key: str) -> bool:
    return marker(key) in text


def utc_stamp(ts: float | None = None) -> str:
    dt = datetime.fromtimestamp(ts, tz=timezone.utc) if ts is not None else datetime.now(timezone.utc)
    return dt.strftime("%Y-%m-%d %H:%M:%S UTC")


def fmt_acc(summary: EvalSummary) -> str:
    """'0.415 (95% CI 0.348-0.485, n=200)'."""
    lo, hi = summary.acc_ci95
    return f"{summary.eval_acc:.3f} (95% CI {lo:.3f}-{hi:.3f}, n={summary.n_examples})"


def render_trajectory(trajectory: list[dict]) -> str:
    """A markdown table of mean train reward per step bucket (from `phases.evals.train_trajectory`)."""
    if not trajectory:
        return "_no train rollouts found_"
    rows = ["| steps | mean train reward | steps seen |", "|---|---|---|"]
    rows += [f"| {b['steps']} | {b['reward_mean']:.3f} | {b['n_steps']} |" for b in trajectory]
    return "\n".join(rows)


def render_iter0(summary: EvalSummary, *, trajectory: list[dict] | None, init_from: str | None = None,
                 ts: float | None = None, warning: str | None = None, split: str = "eval",
                 notes: tuple[str, ...] = ()) -> str:
    """The skill's procedure's iter_0 entry: source, eval_acc with interval and n, trajectory by 20-step buckets, checkpoint.

    For --init-from the source reads "Inherited via --init-from" and there is no trajectory (seed 2A.3).
    `warning` (the no-signal "NOT A RESULT" line) goes first, in bold, above the score.
    `split` labels what eval_acc was measured on ("train (no eval split)" for an env without one);
    `notes` are extra bullet lines (e.g. whether the evaluated rows were held out of training).
    """
    lines = [marker("iter_0"), f"## Iteration 0 — baseline ({utc_stamp(ts)})", ""]
    if warning:
        lines += [f"**{warning}**", ""]
    if init_from:
        lines.append(f"- Source: Inherited via --init-from `{init_from}` (step {summary.final_step})")
    else:
        lines.append(f"- Source: trained here on the real environment ({summary.final_step} steps)")
    lines += [
        f"- eval_acc: {fmt_acc(summary)}{'' if split == 'eval' else f' on {split}'}; correctness rule: {summary.correct_rule}",
        f"- eval_reward_mean: {summary.eval_reward_mean:.3f} over {summary.n_eval} eval rollouts",
    ]
    if summary.train_reward_mean is not None:
        steps = summary.train_reward_steps
        span = f"steps {steps[0]}-{steps[-1]}" if steps else "last steps"
        lines.append(f"- train_reward_mean: {summary.train_reward_mean:.3f} ({span})")
    if summary.dropped_lines:
        lines.append(f"- note: {summary.dropped_lines} torn eval line(s) dropped")
    lines += list(notes)
    lines.append(f"- Checkpoint: `{summary.checkpoint or 'none'}`")
    if not init_from:
        lines += ["", "Train reward trajectory (20-step buckets):", "", render_trajectory(trajectory or [])]
    return "\n".join(lines) + "\n"


def iteration_entry_span(text: str, n: int) -> tuple[int, int] | None:
    """[start, end) of iteration n's entry, or None: from its marker line to the next marker line
    (another entry, the summary) or the end. An entry written before the markers (an old run dir)
    starts at the tool's heading "## Iteration n — <UTC stamp>" above the first marked entry, and
    runs to the next level-2 heading or marker line."""
    start = _marker_line(text, marker(f"iter_{n}"))
    if start >= 0:
        nxt = text.find("\n" + TOOL_MARK, start + 1)  # the next line the tool opened (teacher text is fenced)
        return start, (nxt + 1 if nxt >= 0 else len(text))
    # An entry written before the markers lies above the first marked one; below it, a heading
    # without a marker is the teacher's (every marked entry's text is the teacher's to write).
    first = _ITER_MARKERS.search(text)
    m = re.compile(rf"(?m)^## Iteration {n} — ").search(text, 0, first.start() if first else len(text))
    if m is None:
        return None
    start = m.start()
    nxt = [i for i in (text.find("\n## ", start + 1), text.find("\n" + TOOL_MARK, start + 1)) if i >= 0]
    return start, (min(nxt) + 1 if nxt else len(text))


def has_iteration_entry(text: str, n: int) -> bool:
    """Whether iteration n's pre-iteration entry is in the scratchpad (by its marker, or the old stamped heading)."""
    return iteration_entry_span(text, n) is not None


def unfilled_teacher_sections(text: str, n: int) -> list[str]:
    """What the teacher still has to write before iteration n's data is gated: iteration n's
    sections 1, 3, 4, and the "what worked" line of iteration n-1's results (n >= 2)."""
    missing = []
    span = iteration_entry_span(text, n)
    if span:
        entry = text[span[0]:span[1]]
        missing += [f"iter_{n} section {k} ({head})" for k, (head, ph) in TEACHER_SECTIONS.items() if ph in entry]
    prev = iteration_entry_span(text, n - 1) if n >= 2 else None
    if prev and WORKED_PLACEHOLDER in text[prev[0]:prev[1]]:
        missing.append(f"iter_{n - 1} section 5 (what worked / what didn't / carry over)")
    return missing


def fill_teacher_sections(path: Path, n: int, sections: dict[int, str], worked_prev: str | None = None) -> list[str]:
    """Replace the placeholders of iteration n's sections {1|3|4: markdown} and, with
    `worked_prev`, iteration n-1's "what worked" line. Returns what is still unfilled.
    Text already written by the teacher is never touched (only placeholders are)."""
    unknown = set(sections) - set(TEACHER_SECTIONS)
    if unknown:
        raise ValueError(f"scratchpad sections {sorted(unknown)}: the teacher writes sections 1, 3 and 4 only")
    text = Path(path).read_text(encoding="utf-8")
    span = iteration_entry_span(text, n)
    if span:
        entry = text[span[0]:span[1]]
        for k, body in sections.items():
            entry = entry.replace(TEACHER_SECTIONS[k][1], fenced(body.strip()) or TEACHER_SECTIONS[k][1], 1)
        text = text[:span[0]] + entry + text[span[1]:]
    prev = iteration_entry_span(text, n - 1) if (worked_prev and n >= 2) else None
    if prev:
        entry = text[prev[0]:prev[1]].replace(WORKED_PLACEHOLDER, fenced(worked_prev.strip()), 1)
        text = text[:prev[0]] + entry + text[prev[1]:]
    atomic_write_text(Path(path), text)
    return unfilled_teacher_sections(text, n)
