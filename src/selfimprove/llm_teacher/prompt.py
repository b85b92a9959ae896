"""The built-in LLM teacher's prompt: SKILL.md's teacher sections plus the iteration's TRAIN inputs.

The instructions are cut from the packaged SKILL.md and SKILL-reference.md by section title,
so the agent and this teacher read one text: a section renamed in SKILL.md fails here (and in
tests/test_llm_teacher.py) instead of silently dropping out of the prompt. The only text of
our own is REPLY_FORMAT: how to hand the files back, which the agent does with its file tools.

Inputs are the files the agent reads for iteration N (hub_env.json, weakness_stats.json,
failures.jsonl, analysis.json, the skeletons it fills, the earlier scratchpad entries), all
TRAIN material: eval rows never reach them (the tool seals them before any of these files is
written), and nothing else of the run dir is read here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import SelfImproveError
from ..rundir import read_utf8
from ..skill import packaged_text
from ..teacher import TeacherContext

# (file, section titles): the parts of the skill that are the teacher's job. The phases the
# tool runs itself (bootstrap, baseline, compare, ...) are left out: the LLM acts in Phase 3 only.
TEACHER_SECTIONS = (
    ("SKILL.md", ("Rules you never break", "Phase 3: iterate (the loop)", "Files you write (and only these)")),
    ("SKILL-reference.md", ("What you read", "weakness_report.md front matter (the report gate)",
                            "The generator contract", "The dataset gate (every rule, every row; exit 4 lists all failures)",
                            "overrides.toml (optional, per iteration)")),
)

# Caps per input, in characters: a prompt stays within a small model's context, and the
# lowest-reward failures come first in failures.jsonl, so a cut keeps the worst ones.
INPUT_CHARS = {"weakness_stats.json": 40_000, "failures.jsonl": 40_000, "scratchpad.md": 30_000}

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


def _capped(name: str, text: str) -> str:
    cap = INPUT_CHARS.get(name)
    if cap is None or len(text) <= cap:
        return text
    cut = text[:cap].rsplit("\n", 1)[0]  # whole lines only: a half JSON row reads as a broken file
    return f"{cut}\n[... cut at {cap} characters of {len(text)}]"


def _block(name: str, text: str) -> str:
    return f'<input name="{name}">\n{_capped(name, text).rstrip()}\n</input>'


def inputs_message(ctx: TeacherContext) -> str:
    """The first user message of iteration N: what the agent reads at the exit-3 stop."""
    it = ctx.iter_dir
    blocks = [f"Iteration {ctx.iteration}: write iter_{ctx.iteration}/weakness_report.md and "
              f"iter_{ctx.iteration}/gen_dataset.py and your scratchpad sections."]
    blocks.append(_block("hub_env.json", json.dumps(ctx.hub_env, indent=1, ensure_ascii=False)))
    if ctx.weakness is not None:
        blocks.append(_block("weakness_stats.json", json.dumps(ctx.weakness, indent=None, ensure_ascii=False)))
    blocks.append(_block("analysis.json", json.dumps(ctx.analysis, indent=1, ensure_ascii=False)))
    blocks.append(_block("failures.jsonl", _read(ctx.failures_path)))
    for name in ("weakness_report.md", "gen_dataset.py"):  # the skeletons the tool wrote (format, own checks)
        if (it / name).is_file():
            blocks.append(_block(f"skeleton {name}", _read(it / name)))
    if ctx.scratchpad_path is not None and Path(ctx.scratchpad_path).is_file():
        blocks.append(_block("scratchpad.md", _read(Path(ctx.scratchpad_path))))
    return "\n\n".join(blocks)


def feedback_message(feedback: str) -> str:
    return ("The tool wrote your files and ran them; it stopped with this report. Fix the generator or "
            f"the report (never the rows, never the bar) and reply with every file again:\n\n{feedback.strip()}")


def _read(path: Path) -> str:
    try:
        return read_utf8(path)
    except OSError as e:
        raise SelfImproveError(f"{path}: cannot read it for the LLM teacher ({e.strerror}); "
                               "delete the iteration's skeletons.json and re-run to redo the analysis") from None
