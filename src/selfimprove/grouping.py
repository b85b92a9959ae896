"""Prompt groups that mean something on any env: what the env itself offers, by a stated rule.

    g = choose_grouping(rows, "auto")   # rows: (question, task label or None, answer or None)
    g.label(question)                   # the group of one prompt
    g.name, g.rule, g.note              # which rule, what it does, and why (a fallback is stated)

Rules (`--group-by NAME`, or `path/to/file.py:FUNC` for a function of the prompt text):

- `task`: a task or category field the env writes into the row's info (TASK_KEYS, at the top
  level or under `metadata`); reasoning-gym rows carry one.
- `template`: the prompt with digits and quoted spans masked (default_group); the
  embedded env's kinds (`###+#`), and what was the only rule before.
- `answer`: the reference answer's type and length (`int/2 digits`, `word/5 chars`, `text/10-19 chars`).
- `auto` (the default): the first of task, template, answer whose groups are not degenerate.

Degenerate groups carry no information for a teacher: a single group over many prompts, or
mostly groups of one prompt (singleton share above DEGENERATE_SINGLETON_SHARE; a word env's
templates gave "48 groups of 48 prompts"). A degenerate rule is never used silently: the
chooser falls back along FALLBACK (task -> template -> answer) and `note` says what it asked,
why that was degenerate and what it used; when every rule is degenerate it keeps the first one
offered and says so (`degenerate` is set, and the summary and the teacher's inputs show it).

The guessing prior of a group is the share of its prompts whose reference answer is the
group's commonest answer: what always answering that one answer would score. A solve rate at
or under it shows no skill (letter_counting's counts: 0.59 by always answering the same count).
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .errors import TeacherError, UsageError

_QUOTED = re.compile(r'"[^"\n]{0,200}"|“[^”\n]{0,200}”|(?<![\w\'])\'[^\'\n]{1,200}\'(?![\w\'])')
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SPACE = re.compile(r"\s+")


def default_group(question: str) -> str:
    """The prompt's template: numbers as one `#` per digit, quoted literals as `"…"`, spaces collapsed."""
    text = _QUOTED.sub('"…"', question)
    text = _NUMBER.sub(lambda m: re.sub(r"\d", "#", m.group(0)), text)
    return _SPACE.sub(" ", text).strip()


TASK_KEYS = ("task", "category", "kind", "type", "source_dataset", "dataset", "subject", "domain")
RULES = ("task", "template", "answer")
FALLBACK = RULES
RULE_TEXT = {
    "task": "the task/category field of the row's info (" + ", ".join(TASK_KEYS) + "; or under info.metadata)",
    "template": "the prompt with every digit as # and quoted spans as \"…\"",
    "answer": "the reference answer's type and length (int digits, word chars, text length in tens)",
}
DEGENERATE_SINGLETON_SHARE = 0.5  # more than half the groups hold one prompt: per-prompt figures in disguise
MIN_PROMPTS_FOR_VERDICT = 8  # fewer distinct prompts than this: too few to call any grouping degenerate


def task_label(info: object) -> str | None:
    """The env's own task/category of a row: the first TASK_KEYS field holding a short scalar, in info
    or info['metadata'] (a JSON string is read too). None when the env offers none."""
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except ValueError:
            return None
    if not isinstance(info, dict):
        return None
    for d in (info, info.get("metadata")):
        if isinstance(d, dict):
            for key in TASK_KEYS:
                v = d.get(key)
                if isinstance(v, (str, int)) and not isinstance(v, bool) and 0 < len(str(v)) <= 80:
                    return f"{key}={v}"
    return None


_INT = re.compile(r"-?\d+")
_NUM = re.compile(r"-?\d+\.\d+")
_WORD = re.compile(r"[A-Za-z]+")


def answer_label(answer: object) -> str:
    """The answer's type and length: `int/2 digits`, `number/3 chars`, `word/5 chars`, `text/10-19 chars`."""
    a = "" if answer is None else str(answer).strip()
    if not a:
        return "empty"
    if _INT.fullmatch(a):
        return f"int/{len(a.lstrip('-'))} digits" + (" negative" if a.startswith("-") else "")
    if _NUM.fullmatch(a):
        return f"number/{len(a)} chars"
    if _WORD.fullmatch(a):
        return f"word/{len(a)} chars"
    tens = len(a) // 10 * 10
    return f"text/{tens}-{tens + 9} chars"


@dataclass(frozen=True)
class PromptRow:
    """What grouping needs of one distinct prompt: its text, the env's task label (or None), its answer."""

    question: str
    task: str | None = None
    answer: str | None = None


def _labels(rule: str, rows: list[PromptRow]) -> dict[str, str] | None:
    """question -> label under `rule`; None when the env does not offer it (no row has a task field)."""
    if rule == "task":
        if not any(r.task for r in rows):
            return None
        return {r.question: r.task or "task=(none)" for r in rows}
    if rule == "template":
        return {r.question: default_group(r.question) for r in rows}
    if rule == "answer":
        return {r.question: answer_label(r.answer) for r in rows}
    raise ValueError(rule)


def degeneracy(labels: dict[str, str]) -> str | None:
    """Why these groups are useless to a teacher, or None: one group, or mostly singletons."""
    n = len(labels)
    if n < MIN_PROMPTS_FOR_VERDICT:
        return None
    sizes = Counter(labels.values())
    if len(sizes) == 1:
        return f"a single group of {n} prompts"
    share = sum(1 for c in sizes.values() if c == 1) / len(sizes)
    if share > DEGENERATE_SINGLETON_SHARE:
        return f"{len(sizes)} groups of {n} prompts, singleton share {share:.2f} (> {DEGENERATE_SINGLETON_SHARE})"
    return None


@dataclass
class Grouping:
    """The grouping in use: its rule's name and text, the labels, and a note when it is a fallback or degenerate."""

    name: str
    rule: str
    labels: dict[str, str] = field(default_factory=dict)
    asked: str = "auto"
    degenerate: str | None = None  # set when even the rule in use is degenerate (every rule was)
    note: str = ""
    fn: Callable[[str], str] | None = None  # a user's function of the prompt text (FILE.py:FUNC)

    def label(self, question: str) -> str:
        if question in self.labels:
            return self.labels[question]
        return self.fn(question) if self.fn is not None else default_group(question)

    def record(self) -> dict:
        """The JSON-ready description weakness_stats.json keeps under `grouping`."""
        return {"name": self.name, "rule": self.rule, "asked": self.asked, "degenerate": self.degenerate,
                "note": self.note}


def choose_grouping(rows: Iterable[PromptRow], asked: str | None = "auto",
                    fn: Callable[[str], str] | None = None) -> Grouping:
    """The grouping for `asked` (a rule name, `auto`, or a user function's spec with `fn`), falling back
    along FALLBACK when it is degenerate or not offered by the env; the note states what happened."""
    asked = asked or "auto"
    rows = list({r.question: r for r in rows}.values())
    if fn is not None:  # a user's own grouping is used as given; its degeneracy is stated, not overridden
        labels = {r.question: str(fn(r.question)) for r in rows}
        why = degeneracy(labels)
        return Grouping(asked, f"the user's function {asked}", labels, asked, why,
                        f"grouping {asked} is degenerate: {why}" if why else "", fn)
    if asked != "auto" and asked not in RULES:
        raise ValueError(f"--group-by '{asked}': expected one of auto, {', '.join(RULES)}, or path/to/file.py:FUNCTION")
    order = FALLBACK if asked == "auto" else (asked, *[r for r in FALLBACK if r != asked])
    tried: list[str] = []
    candidates: list[tuple[str, dict[str, str], str]] = []
    for rule in order:
        labels = _labels(rule, rows)
        if labels is None:
            tried.append(f"{rule}: the env offers none")
            continue
        why = degeneracy(labels)
        if why is None:
            note = "" if not tried else f"asked {asked}; " + "; ".join(tried) + f"; so grouped by {rule}"
            if asked == "auto" and not tried:
                note = ""
            return Grouping(rule, RULE_TEXT[rule], labels, asked, None, note)
        tried.append(f"{rule}: degenerate ({why})")
        candidates.append((rule, labels, why))
    # every rule is degenerate: keep the first offered in the asked order (no rule is better), and say so
    rule, labels, why = candidates[0] if candidates else ("template", _labels("template", rows) or {}, "no prompts")
    return Grouping(rule, RULE_TEXT[rule], labels, asked, why,
                    f"asked {asked}; every rule is degenerate ({'; '.join(tried)}); grouped by {rule} anyway: "
                    "read the per-prompt figures (`selfimprove weaknesses --prompts`) or pass your own --group-by")


def guess_priors(rows: Iterable[PromptRow], grouping: Grouping) -> dict[str, dict]:
    """Per group: its commonest reference answer's share of its prompts (the guessing prior) and that answer."""
    answers: dict[str, Counter] = {}
    for r in {r.question: r for r in rows}.values():
        if r.answer is not None and str(r.answer) != "":
            answers.setdefault(grouping.label(r.question), Counter())[str(r.answer).strip()] += 1
    out = {}
    for g, c in answers.items():
        top, n = c.most_common(1)[0]
        out[g] = {"guess_prior": round(n / sum(c.values()), 4), "commonest_answer": top[:40]}
    return out


def check_group_by(spec: str | None) -> None:
    """Refuse a --group-by that is neither a rule name nor path/to/file.py:FUNCTION (one line, exit 2)."""
    if spec is None or spec == "auto" or spec in RULES or ":" in spec:
        return
    raise UsageError(f"--group-by '{spec}': expected auto, {', '.join(RULES)}, or path/to/file.py:FUNCTION "
                     "(a function of the prompt text)")


def load_group_fn(spec: str) -> Callable[[str], str]:
    """'path/to/file.py:FUNC' -> FUNC, a function of the prompt text returning its group label."""
    target, _, attr = spec.rpartition(":")
    path = Path(target).expanduser().resolve()
    if not target.endswith(".py") or not attr:
        raise UsageError(f"--group-by '{spec}': expected path/to/file.py:FUNCTION (a function of the prompt text)")
    if not path.is_file():
        raise UsageError(f"--group-by '{spec}': file {path} not found")
    module_spec = importlib.util.spec_from_file_location(f"selfimprove_grouping_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
    try:
        module_spec.loader.exec_module(module)  # type: ignore[union-attr]
    except (Exception, SystemExit) as e:  # noqa: BLE001  (user code)
        raise TeacherError(f"--group-by '{spec}': {path} failed to load: {type(e).__name__}: {e}; fix the file") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise UsageError(f"--group-by '{spec}': {path} has no function '{attr}'")

    def group_of(question: str) -> str:
        try:
            return str(fn(question))
        except (Exception, SystemExit) as e:  # noqa: BLE001  (user code; its sys.exit(3) ended the CLI silently with exit 3)
            raise TeacherError(f"--group-by '{spec}': {attr}() raised {type(e).__name__}: {e} on the prompt "
                               f"{question[:80]!r}; fix the function") from None

    return group_of
