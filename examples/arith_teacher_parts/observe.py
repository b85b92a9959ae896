"""What the teacher reads: failures, train rollouts, the train split's questions, earlier iterations.

Part 2 of the teacher. Structure is inferred from the question text only:
split_frame finds the arithmetic expression inside a question (the frame around
it is kept), and Obs classifies one rollout or failure row from it (structure
key, carry vector, carry class, zero digit). read_failures reads the iteration's
failures.jsonl, read_rollouts the last ANCHOR_STEPS steps of an arm's train
rollouts; error_kind says why a completion earned no reward, judged against the
value computed from the expression (no hidden label is read). _majority_frame
and _ranges describe the questions as the generator must reproduce them; the
file helpers read earlier iterations' datasets (never a repeat) and JSON files.

The train split itself is loaded by ArithTeacher (teacher.py), which caches it.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .expr import carry_vector, leaves, parse_expr, shape_of, signs_of, value
from .settings import ANCHOR_STEPS

_SPAN = re.compile(r"[\d(][\d\s+\-*()]*[\d)]")


def split_frame(question):
    """(prefix, expression, suffix) around the longest arithmetic span of a question, or None."""
    spans = [m for m in _SPAN.finditer(question) if re.search(r"\d\s*[-+*]\s*[\d(]", m.group())]
    if not spans:
        return None
    m = max(spans, key=lambda s: len(s.group()))
    return question[: m.start()], m.group(), question[m.end():]


def _message_text(messages, role):
    if isinstance(messages, str):
        return messages
    if isinstance(messages, list):
        texts = [m.get("content") or "" for m in messages if isinstance(m, dict) and m.get("role", role) == role]
        texts = [t if isinstance(t, str) else json.dumps(t) for t in texts]
        return texts[-1] if role == "user" and texts else "\n".join(texts)
    return "" if messages is None else str(messages)


@dataclass
class Obs:
    """One train rollout (or failure row), classified from its question text."""

    question: str
    expr: str
    node: tuple
    reward: float
    completion: str = ""
    truncated: bool = False
    step: int | None = None
    idx: int | None = None
    example_id: Any = None
    key: str = field(init=False)  # structure: shape + sign of every sub-result, e.g. '##-(##-##)|++'
    vec: tuple = field(init=False)  # carries/borrows per operation
    cls: int = field(init=False)  # 0, 1, 2 (= two or more) carries/borrows

    def __post_init__(self) -> None:
        self.key = f"{shape_of(self.node)}|{signs_of(self.node)}"
        self.vec = carry_vector(self.node)
        self.cls = min(sum(self.vec), 2)

    @functools.cached_property
    def zero(self) -> bool:
        """A 0 digit in an operand or the result."""
        return "0" in "".join(str(x) for x in leaves(self.node)) + str(abs(value(self.node)))

    @property
    def ok(self) -> bool:
        return self.reward >= 0.5


def _obs(question: str, reward: float, **kw) -> Obs | None:
    parts = split_frame(question or "")
    node = parse_expr(parts[1]) if parts else None
    return Obs(question, parts[1], node, reward, **kw) if node else None


def read_failures(path: Path) -> tuple[list[Obs], int]:
    """Classified failure rows (with step/idx) and how many rows were not expressions."""
    out, skipped = [], 0
    if not Path(path).is_file():
        return out, skipped
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        o = _obs(str(r.get("question", "")), float(r.get("reward") or 0.0), completion=str(r.get("completion") or ""),
                 truncated=bool(r.get("is_truncated")), step=r.get("step"), idx=r.get("idx"), example_id=r.get("example_id"))
        if o is None:
            skipped += 1
        else:
            out.append(o)
    return out, skipped


def rollout_files(arm_dir: Path) -> list[tuple[int, Path]]:
    """(step, train_rollouts.jsonl) of an arm dir, ascending."""
    root = Path(arm_dir) / "prime_out" / "run_default" / "rollouts"
    found = []
    for p in root.glob("step_*"):
        tail = p.name[5:]
        if tail.isdigit() and (p / "train_rollouts.jsonl").is_file():
            found.append((int(tail), p / "train_rollouts.jsonl"))
    return sorted(found)


def read_rollouts(arm_dir: Path, last: int = ANCHOR_STEPS) -> tuple[list[Obs], list[int]]:
    """Classified TRAIN rollouts of an arm's last `last` steps, and the steps read."""
    files = rollout_files(arm_dir)[-last:]
    out = []
    for step, path in files:
        with open(path, encoding="utf-8") as f:
            for idx, line in enumerate(f):
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line
                o = _obs(_message_text(r.get("prompt"), "user"), float(r.get("reward") or 0.0),
                         completion=_message_text(r.get("completion"), "assistant"),
                         truncated=bool(r.get("is_truncated")), step=step, idx=idx, example_id=r.get("example_id"))
                if o is not None:
                    out.append(o)
    return out, [s for s, _ in files]


def error_kind(o: Obs, tag: str) -> str:
    """Why a completion earned no reward, judged against the value of the expression."""
    found = re.findall(rf"<{tag}>\s*(.*?)\s*</{tag}>", o.completion, re.S)
    if not found:
        return "truncated" if o.truncated else "no answer tag"
    got = found[-1].strip()
    if not re.fullmatch(r"-?\d+", got):
        return "non-integer answer"
    g, t = int(got), value(o.node)
    if g == t:
        return "right value, rejected format"
    if g == -t:
        return "sign error"
    d = abs(g - t)
    if d >= 10 and 10 ** round(math.log10(d)) == d:
        return "off by a power of ten"
    return "off by one" if d == 1 else "wrong digits"



def _majority_frame(questions: list[str]) -> dict:
    frames = Counter()
    for q in questions:
        parts = split_frame(q)
        if parts:
            frames[(parts[0], parts[2], bool(re.search(r"\s[-+*]\s", parts[1])))] += 1
    (prefix, suffix, spaced), _ = frames.most_common(1)[0] if frames else (("", "", False), 0)
    return {"prefix": prefix, "suffix": suffix, "spaced": spaced}


def _ranges(obs: list[Obs]) -> list[list[int]]:
    """Observed [min, max] of each operand position of one structure."""
    cols = list(zip(*(leaves(o.node) for o in obs)))
    return [[min(c), max(c)] for c in cols]



def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def _read_jsonl(path: Path) -> list[dict]:
    if not Path(path).is_file():
        return []
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def _prior_questions(prior_iterations) -> list[str]:
    out = []
    for p in prior_iterations or []:
        out += [r["question"] for r in _read_jsonl(Path(p) / "dataset.jsonl") if isinstance(r.get("question"), str)]
    return out

