"""The built-in LLM teacher's prompt: SKILL.md's teacher sections plus the iteration's TRAIN inputs.

The instructions are cut from the packaged SKILL.md and SKILL-reference.md by section title,
so the agent and this teacher read one text: a section renamed in SKILL.md fails here (and in
tests/test_llm_teacher.py) instead of silently dropping out of the prompt. The only text of
our own is REPLY_FORMAT: how to hand the files back, which the agent does with its file tools.

Inputs are what the agent reads for iteration N (hub_env.json, the knobs in force, the weakness
summary `selfimprove weaknesses` prints, analysis.json, failures.jsonl, the skeletons it fills,
the earlier scratchpad entries), all TRAIN material: eval rows never reach them (the tool seals
them before any of these files is written), and nothing else of the run dir is read here (never
eval_summary.json, eval_ngrams.json or prime_out/). The whole opening request (instructions and
inputs) fits ApiSettings.input_chars (--teacher-input-chars): the weakness summary is whole, and
what is cut to fit (failure rows, old scratchpad lines, groups past half the inputs) is counted
in a [bracketed] line, never cut mid-row.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import SelfImproveError
from ..phases.context import RunContext
from ..phases.knobs import KNOBS_FILE, knobs_in_force, knobs_text
from ..rundir import RunDir, read_json_object, read_utf8
from ..skill import packaged_text
from ..teacher import TeacherContext
from ..weakness import CLASSES
from ..weakness_summary import capped_summary

# (file, section titles): the parts of the skill that are the teacher's job. The phases the
# tool runs itself (bootstrap, baseline, compare, ...) are left out: the LLM acts in Phase 3 only.
TEACHER_SECTIONS = (
    ("SKILL.md", ("Rules you never break", "Phase 3: iterate (the loop)", "Files you write (and only these)")),
    ("SKILL-reference.md", ("What you read", "weakness_report.md front matter (the report gate)",
                            "The generator contract", "The dataset gate (every rule, every row; exit 4 lists all failures)",
                            "What the row rules compare (as the gate applies them)",
                            "overrides.toml (optional, per iteration)")),
)

# The opening request's budget (ApiSettings.input_chars, --teacher-input-chars) is shared so: the
# weakness summary is whole, its groups capped by class order only past SUMMARY_SHARE of the inputs;
# the small fixed inputs (hub_env, knobs, analysis, skeletons) are whole; of what is left, the
# scratchpad's newest lines take up to SCRATCHPAD_SHARE and failures the rest, whole rows, sampled
# across groups worst first. Every cut says what it left out.
SUMMARY_SHARE = 0.5
SCRATCHPAD_SHARE = 0.3

FILE_NAMES = ("weakness_report.md", "gen_dataset.py", "overrides.toml", "rewards.py")

REPLY_FORMAT = """\
You are the teacher of the skill below, run unattended by `selfimprove run`: you cannot run
commands or open files. The tool has already run `selfimprove iterate` and
`selfimprove weaknesses` for you; their outputs and the files you would read are in the next
message. It writes the files you return into iter_N/, fills your scratchpad sections, runs your
generator and the gates, and sends you the gate report when one fails.

Reply with every file in full, each between its own tags, and nothing outside them matters:

<file name="weakness_report.md">...the whole file: YAML front matter, then markdown...</file>
<file name="gen_dataset.py">...the whole generator...</file>
<scratchpad section="1">understanding from traces (cite prompts by step/idx)</scratchpad>
<scratchpad section="3">plan for the data</scratchpad>
<scratchpad section="4">hyperparameter / reward changes + rationale, or "none"</scratchpad>

From iteration 2 also <worked_prev>what worked / didn't in the previous iteration</worked_prev>.
Optional: <file name="overrides.toml">...</file> and <file name="rewards.py">...</file>.
When the tool sends a gate report, reply again in the same format with the fixed files.
"""


def section(text: str, title: str, source: str) -> str:
    """The markdown section `## title` of `text`, its heading included, up to the next `## `."""
    match = re.search(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", text, flags=re.M | re.S)
    if match is None:
        raise SelfImproveError(f"{source}: no section '## {title}', which the LLM teacher sends as its instructions; "
                               "restore the heading or update TEACHER_SECTIONS in selfimprove/llm_teacher/prompt.py")
    return match.group(0).strip()


def teacher_instructions() -> str:
    """The skill's teacher sections, verbatim, in the skill's order."""
    parts = []
    for name, titles in TEACHER_SECTIONS:
        text = packaged_text(name)
        parts += [section(text, title, name) for title in titles]
    return "\n\n".join(parts)


def _block(name: str, text: str) -> str:
    return f'<input name="{name}">\n{text.rstrip()}\n</input>'


def _compact(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def inputs_message(ctx: TeacherContext, budget: int | None = None) -> str:
    """The first user message of iteration N: what the agent reads at the exit-3 stop, within `budget`
    characters (None: everything whole). Order: the fixed inputs, the weakness summary, failures, the
    skeletons, the scratchpad; the budget fills the summary first and failures and scratchpad last."""
    it = ctx.iter_dir
    budget = budget if budget is not None else 10**9
    head = (f"Iteration {ctx.iteration}: write iter_{ctx.iteration}/weakness_report.md and "
            f"iter_{ctx.iteration}/gen_dataset.py and your scratchpad sections. These inputs fit "
            f"{budget:,} characters (--teacher-input-chars less the instructions); every input below is whole "
            "unless a [bracketed line] in it says what was left out.")
    fixed = [head, _block("hub_env.json", _compact(ctx.hub_env))]
    knobs = knobs_block(ctx)
    if knobs:
        fixed.append(_block("knobs in force", knobs))
    fixed.append(_block("analysis.json", _compact(ctx.analysis)))
    skeletons = [_block(f"skeleton {name}", _read(it / name)) for name in ("weakness_report.md", "gen_dataset.py")
                 if (it / name).is_file()]  # the skeletons the tool wrote (format, own checks)
    used = sum(len(b) + 2 for b in fixed + skeletons)
    summary = (_block("weakness summary (`selfimprove weaknesses`)", capped_summary(ctx.weakness, int(budget * SUMMARY_SHARE)))
               if ctx.weakness is not None else None)
    used += len(summary) + 2 if summary else 0
    left = max(0, budget - used)
    pad = None
    if ctx.scratchpad_path is not None and Path(ctx.scratchpad_path).is_file():
        pad_text = newest_lines(_read(Path(ctx.scratchpad_path)), int(left * SCRATCHPAD_SHARE))
        pad = _block("scratchpad.md", pad_text)
        left -= len(pad) + 2
    failures = _block("failures.jsonl", sampled_failures(_read(ctx.failures_path), max(0, left - 40)))
    message = "\n\n".join(b for b in (*fixed, summary, failures, *skeletons, pad) if b)
    if len(message) > budget:  # the whole inputs (summary, skeletons, ...) cannot shrink further: say so
        message = (f"[these inputs are {len(message) - budget:,} characters over the budget: the inputs that are "
                   "always whole do not fit; raise --teacher-input-chars]\n" + message)
    return message


def knobs_block(ctx: TeacherContext) -> str | None:
    """The knobs in force for this iteration's arm (phases/knobs.py), read from the run dir; None without one."""
    rd = RunDir(ctx.run_dir)
    if not rd.run_json.is_file():
        return None  # a context without a run dir (a teacher tried by hand)
    try:
        return knobs_text(knobs_in_force(RunContext.load(rd), ctx.iteration))
    except SelfImproveError as e:  # e.g. an overrides.toml left in iter_N/ that fails its checks
        saved = read_json_object(ctx.iter_dir / KNOBS_FILE)
        base = knobs_text(saved) if saved else "(no iter_N/knobs.json)"
        return f"{base}\n[without overrides.toml, which does not pass its checks: {e}]"


def newest_lines(text: str, budget: int) -> str:
    """The text whole when it fits, else its newest (last) whole lines that fit, after one line saying so."""
    if len(text) <= budget:
        return text
    lines = text.splitlines()
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        if size + len(line) + 1 > max(0, budget - 120):
            break
        kept.append(line)
        size += len(line) + 1
    cut = len(lines) - len(kept)
    return (f"[the first {cut} of {len(lines)} lines ({len(text) - size:,} characters) left out to fit "
            "--teacher-input-chars; the newest lines follow]\n" + "\n".join(reversed(kept)))


def sampled_failures(text: str, budget: int) -> str:
    """failures.jsonl as whole rows within `budget`: round-robin over the prompt groups, worst group first
    (class never -> solved, then solve rate), each group's lowest rewards first; a count line when any
    row is left out. Rows keep failures.jsonl's order of rank inside the sample."""
    rows = [line for line in text.splitlines() if line.strip()]
    if len(text) <= budget:
        return text
    parsed = []
    for k, line in enumerate(rows):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = {}
        parsed.append((k, row if isinstance(row, dict) else {}, line))
    order = {c: i for i, c in enumerate(CLASSES)}
    by_group: dict[str, list[tuple[int, dict, str]]] = {}
    for item in parsed:
        by_group.setdefault(str(item[1].get("group", "")), []).append(item)

    def worst(g: str) -> tuple:
        first = by_group[g][0][1]
        rate = first.get("group_solve_rate")
        return (order.get(first.get("group_class"), len(CLASSES)), rate if isinstance(rate, (int, float)) else 1.0,
                by_group[g][0][0])

    queues = [by_group[g] for g in sorted(by_group, key=worst)]
    chosen: list[tuple[int, str]] = []
    size = 0
    while any(queues):
        for q in queues:
            if q:
                k, _, line = q.pop(0)
                if size + len(line) + 1 <= budget - 200:  # room for the count line
                    chosen.append((k, line))
                    size += len(line) + 1
    chosen.sort()
    groups = len({str(parsed[k][1].get("group", "")) for k, _ in chosen})
    note = (f"[{len(chosen)} of {len(rows)} rows shown ({len(by_group)} prompt groups, {groups} of them shown): "
            "round-robin over the groups, worst class and solve rate first, each group's lowest rewards first; "
            "the rest left out to fit --teacher-input-chars]")
    return "\n".join([line for _, line in chosen] + [note])


def feedback_message(feedback: str) -> str:
    return ("The tool wrote your files and ran them; it stopped with this report. Fix the generator or "
            f"the report (never the rows, never the bar) and reply with every file again:\n\n{feedback.strip()}")


def _read(path: Path) -> str:
    try:
        return read_utf8(path)
    except OSError as e:
        raise SelfImproveError(f"{path}: cannot read it for the LLM teacher ({e.strerror}); "
                               "delete the iteration's skeletons.json and re-run to redo the analysis") from None
