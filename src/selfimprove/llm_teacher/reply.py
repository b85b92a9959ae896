"""The LLM teacher's reply: tagged files and scratchpad sections (prompt.REPLY_FORMAT), parsed and written.

Parsing is strict about what must be there (the two files, sections 1, 3 and 4) and lenient
about wrapping: models often put a file in a ``` fence inside its tag, which is unwrapped.
What the files say is not judged here: the tool's gates do that, as for any teacher.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..rundir import atomic_write_text
from ..teacher import TeacherContext
from .prompt import FILE_NAMES

REQUIRED_FILES = ("weakness_report.md", "gen_dataset.py")
SCRATCHPAD_SECTIONS = (1, 3, 4)

_FILE = re.compile(r'<file\s+name="([^"]+)"\s*>\n?(.*?)</file>', re.S)
_SECTION = re.compile(r'<scratchpad\s+section="(\d+)"\s*>(.*?)</scratchpad>', re.S)
_WORKED = re.compile(r"<worked_prev>(.*?)</worked_prev>", re.S)
_FENCE = re.compile(r"\A\s*```[\w.+-]*\n(.*?)\n```\s*\Z", re.S)


@dataclass
class Reply:
    files: dict[str, str] = field(default_factory=dict)
    sections: dict[int, str] = field(default_factory=dict)
    worked_prev: str | None = None


def _unfence(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1) if match else text


def parse_reply(text: str, iteration: int) -> tuple[Reply, list[str]]:
    """The reply's files and sections, and what is missing or unknown (empty: usable)."""
    reply, problems = Reply(), []
    for name, body in _FILE.findall(text):
        if name not in FILE_NAMES:
            problems.append(f'<file name="{name}">: not a file you write (yours: {", ".join(FILE_NAMES)})')
            continue
        reply.files[name] = _unfence(body).rstrip() + "\n"
    for number, body in _SECTION.findall(text):
        if int(number) in SCRATCHPAD_SECTIONS and body.strip():
            reply.sections[int(number)] = body.strip()
    if (worked := _WORKED.search(text)) and worked.group(1).strip():
        reply.worked_prev = worked.group(1).strip()
    problems += [f'no <file name="{name}"> ... </file> in your reply' for name in REQUIRED_FILES
                 if name not in reply.files]
    problems += [f'no <scratchpad section="{n}"> ... </scratchpad> in your reply' for n in SCRATCHPAD_SECTIONS
                 if n not in reply.sections]
    if iteration >= 2 and reply.worked_prev is None:
        problems.append("no <worked_prev> ... </worked_prev> (what worked in the previous iteration) in your reply")
    return reply, problems


def write_reply(ctx: TeacherContext, reply: Reply) -> None:
    """Write the files into iter_N/ and the sections into the scratchpad entry. Each file is
    replaced atomically; an optional file the reply leaves out is left as it was."""
    for name, body in reply.files.items():
        atomic_write_text(ctx.iter_dir / name, body)
    ctx.fill_scratchpad(reply.sections, reply.worked_prev)
