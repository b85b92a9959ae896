"""The report gate: the machine-readable front matter of iter_N/weakness_report.md.

The teacher writes `weakness_report.md` as markdown for humans with a YAML front
matter (between two leading `---` lines) that this module validates:

    report, gate = check_weakness_report(rd.iter(n).root / "weakness_report.md")
    if not gate.passed: print(gate.summary())

`render_report_skeleton` writes a starting point whose placeholders (TODO
markers, zero bucket rows) fail the gate until the teacher fills them in.

What is not covered: whether the evidence really paraphrases failed prompts,
and whether severities match the failures; that is the teacher's judgment.
When the front matter breaks the schema, only the schema errors are reported
(every one of them): the semantic rules need a well-formed report to run.
"""

from __future__ import annotations

import functools
import json
import string
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..resources import project_file
from ..ui import terminal_safe
from .common import GateFailure, GateReport, label_repr, share

GATE = "report"

# Bounds from Phase 3a of the skill's procedure (and DESIGN.md "teacher contract").
DOMAINS_MIN, DOMAINS_MAX = 3, 6
SUBS_MIN, SUBS_MAX = 2, 5
DOMAIN_LABEL_MAX_WORDS = 4  # the skill's procedure says 3-4 words; the rule is 1-4 (short labels are not garbage), stated so everywhere
SUB_LABEL_MAX_WORDS = 6
ROWS_MIN, ROWS_MAX = 500, 1000
BUCKET_MIN_SHARE = 0.03
FEATURES_MIN, FEATURES_MAX = 4, 6
REWARD_MAX_WEIGHT, REWARD_MAX_TOTAL = 0.2, 0.3  # Non-negotiable 2 and 4
SEVERITY_RANK = {"high": 0, "med": 1, "low": 2}
TODO_MARKER = "TODO"
TEMPLATE_NAME = "weakness_report.md"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SubDomain(_Strict):
    """A failure mode inside a domain; (domain.label, label) is a bucket key."""

    label: str = Field(description="<= 6 words; the failure-mode label rows use as info.sub_domain")
    failure_mode: str = Field(description="what goes wrong, in a phrase or one sentence")


class Domain(_Strict):
    """A weakness area seen in the low-reward TRAIN rollouts."""

    label: str = Field(description="1-4 words; rows use it as info.domain")
    severity: Literal["high", "med", "low"] = Field(description="domains are listed high, then med, then low; ties allowed")
    evidence: str = Field(description="one sentence paraphrasing 1-2 failed train prompts")
    sub_domains: list[SubDomain] = Field(description="2-5 failure modes")


class Bucket(_Strict):
    """Target row count of one (domain, sub_domain) pair."""

    domain: str = Field(description="a Domain.label")
    sub_domain: str = Field(description="a SubDomain.label of that domain")
    rows: int = Field(description="target rows; all buckets sum to 500-1000, each >= 3% of the sum")


class Feature(_Strict):
    """A structural pattern of the hardest failures (Pillar 4); rows list labels in info.structural_features."""

    label: str = Field(description="short label, used verbatim in rows")
    definition: str = Field(description="one sentence: what makes a row carry this feature")


class CustomReward(_Strict):
    """An auxiliary reward function (Non-negotiable 4); the hub rubric stays dominant."""

    name: str = Field(description="function name in the rewards file")
    weight: float = Field(description="<= 0.2 each, <= 0.3 over all custom rewards")
    failure_mode: str = Field(description="the sub_domain label it targets most (it scores every row: auxiliary shaping)")
    source_file: str | None = Field(default=None, description="python file defining it, relative to iter_N/")


class WeaknessReport(_Strict):
    """Front matter of iter_N/weakness_report.md (the teacher's Phase 3a output)."""

    eval_acc_prev: float = Field(ge=0.0, le=1.0, description="eval accuracy of iter_{N-1}")
    length_quartile_notes: str = Field(description="reward by completion-length quartile: truncation vs reasoning failures")
    domains: list[Domain] = Field(description="3-6 domains, severity-ordered")
    buckets: list[Bucket] = Field(description="one per (domain, sub_domain) pair")
    structural_features: list[Feature] = Field(description="4-6 task-specific structural features")
    custom_rewards: list[CustomReward] = Field(default_factory=list, description="optional auxiliary rewards")
    fixed_axes: dict[str, str] = Field(
        default_factory=dict,
        description="Pillar 2 axes this data cannot vary -> why (e.g. bare expressions have no cover story); see gates/diversity.py",
    )

    def pairs(self) -> set[tuple[str, str]]:
        """Every (domain, sub_domain) pair the report defines."""
        return {(d.label, s.label) for d in self.domains for s in d.sub_domains}

    def feature_labels(self) -> set[str]:
        return {f.label for f in self.structural_features}

    def failure_modes(self) -> set[str]:
        """Sub-domain labels and failure-mode texts: what a custom reward may cite."""
        return {t for d in self.domains for s in d.sub_domains for t in (s.label, s.failure_mode) if t.strip()}


# ---------------------------------------------------------------- parsing


def split_front_matter(text: str) -> tuple[str, str] | None:
    """(yaml text, markdown body), or None when the text does not open with a `---` block."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    if start == len(lines) or lines[start].strip() != "---":
        return None
    for end in range(start + 1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            return "".join(lines[start + 1 : end]), "".join(lines[end + 1 :])
    return None


def _load_front_matter(path: Path) -> tuple[dict | None, list[GateFailure]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        return None, [GateFailure(rule="front_matter", message=f"{path}: cannot read ({e.strerror or e})")]
    except UnicodeDecodeError as e:
        return None, [GateFailure(rule="front_matter", message=f"{path}: not UTF-8 text (byte {e.object[e.start:e.start + 1]!r} "
                                                             f"at offset {e.start}); save it as UTF-8")]
    parts = split_front_matter(text)
    if parts is None:
        return None, [GateFailure(rule="front_matter", message=f"{path}: no YAML front matter (the file must open with a '---' line and close it with another)")]
    try:
        data = yaml.safe_load(parts[0])
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at front-matter line {where.line + 1}" if where is not None else ""
        return None, [GateFailure(rule="front_matter", message=f"front matter is not valid YAML{at}: {getattr(e, 'problem', None) or e}")]
    if not isinstance(data, dict):
        return None, [GateFailure(rule="front_matter", message=f"front matter must be a YAML mapping, got {type(data).__name__}")]
    return data, []


def _schema_failures(err: ValidationError) -> list[GateFailure]:
    out = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "<root>"
        out.append(GateFailure(rule="schema", message=f"{loc}: {e['msg']}"))
    return out


def parse_weakness_report(path: Path) -> WeaknessReport | GateReport:
    """The validated front matter, or a failing GateReport naming every parse/schema error."""
    data, failures = _load_front_matter(path)
    if data is None:
        return GateReport.build(GATE, failures)
    try:
        return WeaknessReport.model_validate(data)
    except ValidationError as e:
        return GateReport.build(GATE, _schema_failures(e))


# ---------------------------------------------------------------- rules


def _todo_paths(obj: Any, path: str = "") -> list[str]:
    """Dotted paths of every string that still carries a TODO marker."""
    if isinstance(obj, str):
        return [path or "<root>"] if TODO_MARKER in obj else []
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in _todo_paths(v, f"{path}.{k}" if path else str(k))]
    if isinstance(obj, list):
        return [p for i, v in enumerate(obj) for p in _todo_paths(v, f"{path}[{i}]")]
    return []


def _words(label: str) -> int:
    return len(label.split())


def _duplicates(values: list[str]) -> list[str]:
    """Values that occur more than once, compared case- and whitespace-insensitively."""
    counts = Counter(" ".join(v.lower().split()) for v in values)
    return sorted(v for v, c in counts.items() if c > 1)


def report_rule_failures(report: WeaknessReport) -> list[GateFailure]:
    """Every semantic rule over a schema-valid report."""
    fails: list[GateFailure] = []

    def fail(rule: str, message: str) -> None:
        fails.append(GateFailure(rule=rule, message=message))

    doms = report.domains
    if not DOMAINS_MIN <= len(doms) <= DOMAINS_MAX:
        fail("domain_count", f"{len(doms)} domains; need {DOMAINS_MIN}-{DOMAINS_MAX}")
    ranks = [SEVERITY_RANK[d.severity] for d in doms]
    if ranks != sorted(ranks):
        fail("severity_order", f"domains must be ordered high, med, low; got {', '.join(d.severity for d in doms)}")
    for d in doms:
        if not SUBS_MIN <= len(d.sub_domains) <= SUBS_MAX:
            fail("sub_domain_count", f"domain '{d.label}' has {len(d.sub_domains)} sub_domains; need {SUBS_MIN}-{SUBS_MAX}")
        if not 1 <= _words(d.label) <= DOMAIN_LABEL_MAX_WORDS:
            fail("domain_label_words", f"domain label '{d.label}' has {_words(d.label)} words; need 1-{DOMAIN_LABEL_MAX_WORDS}")
        for s in d.sub_domains:
            if not 1 <= _words(s.label) <= SUB_LABEL_MAX_WORDS:
                fail("sub_domain_label_words", f"sub_domain label '{s.label}' ({d.label}) has {_words(s.label)} words; need 1-{SUB_LABEL_MAX_WORDS}")

    # Labels are keys (rows reference them), so they must be unique. The message quotes them to a
    # terminal: their control characters (ESC, OSC, U+202E) are shown escaped, never acted on.
    q = functools.partial(terminal_safe, newlines=False)
    dupes = [f"domain '{q(v)}'" for v in _duplicates([d.label for d in doms])]
    dupes += [f"sub_domain '{q(v)}' in '{q(d.label)}'" for d in doms for v in _duplicates([s.label for s in d.sub_domains])]
    dupes += [f"feature '{q(v)}'" for v in _duplicates([f.label for f in report.structural_features])]
    dupes += [f"custom reward '{q(v)}'" for v in _duplicates([r.name for r in report.custom_rewards])]
    if dupes:
        fail("labels_unique", "duplicate labels: " + "; ".join(dupes))

    empty = [f"domain '{d.label}' evidence" for d in doms if not d.evidence.strip()]
    empty += [f"sub_domain '{s.label}' failure_mode" for d in doms for s in d.sub_domains if not s.failure_mode.strip()]
    if not report.length_quartile_notes.strip():
        empty.append("length_quartile_notes")
    if empty:
        fail("empty_text", "empty text in: " + "; ".join(empty))

    pairs = report.pairs()
    bucket_keys = [(b.domain, b.sub_domain) for b in report.buckets]
    unknown = [k for k in bucket_keys if k not in pairs]
    if unknown:
        domains, subs = {d for d, _ in pairs}, {s for _, s in pairs}
        fail("bucket_unknown_pair", "buckets name pairs the domains do not define: "
             + "; ".join(f"({label_repr(d, domains)}, {label_repr(s, subs)})" for d, s in unknown))
    missing = sorted(pairs - set(bucket_keys))
    if missing:
        fail("bucket_missing_pair", "pairs without a bucket: " + "; ".join(f"({d!r}, {s!r})" for d, s in missing))
    repeated = sorted(k for k, c in Counter(bucket_keys).items() if c > 1)
    if repeated:
        fail("bucket_duplicate", "pairs with more than one bucket: " + "; ".join(f"({d!r}, {s!r})" for d, s in repeated))
    total = sum(b.rows for b in report.buckets)
    if not ROWS_MIN <= total <= ROWS_MAX:
        fail("bucket_total", f"bucket rows sum to {total}; need {ROWS_MIN}-{ROWS_MAX}")
    small = [f"({b.domain!r}, {b.sub_domain!r}) {b.rows} rows = {share(b.rows, total):.1%}" for b in report.buckets if b.rows < BUCKET_MIN_SHARE * total or b.rows <= 0]
    if small:
        fail("bucket_floor", f"buckets under {BUCKET_MIN_SHARE:.0%} of {total} rows: " + "; ".join(small))

    feats = report.structural_features
    if not FEATURES_MIN <= len(feats) <= FEATURES_MAX:
        fail("feature_count", f"{len(feats)} structural features; need {FEATURES_MIN}-{FEATURES_MAX}")
    undefined = [f"'{f.label}'" for f in feats if not f.definition.strip() or not f.label.strip()]
    if undefined:
        fail("feature_definition", "features without a label or definition: " + ", ".join(undefined))

    heavy = [f"{r.name}={r.weight}" for r in report.custom_rewards if not 0 < r.weight <= REWARD_MAX_WEIGHT]
    if heavy:
        fail("custom_reward_weight", f"custom reward weights must be in (0, {REWARD_MAX_WEIGHT}]: " + ", ".join(heavy))
    weight_total = sum(r.weight for r in report.custom_rewards)
    if weight_total > REWARD_MAX_TOTAL + 1e-9:
        fail("custom_reward_total_weight", f"custom reward weights sum to {weight_total:.3g}; max {REWARD_MAX_TOTAL}")
    from .diversity import AXES, MAX_FIXED_AXES, MIN_REASON_WORDS  # the diversity gate owns the axes

    bad_axes = sorted(a for a in report.fixed_axes if a not in AXES)
    unexplained = sorted(a for a, why in report.fixed_axes.items() if a in AXES and len(why.split()) < MIN_REASON_WORDS)
    if bad_axes or unexplained or len(report.fixed_axes) > MAX_FIXED_AXES:
        fail("fixed_axes", f"fixed_axes: names must be among {', '.join(AXES)} (got unknown {bad_axes or 'none'}), each with a "
             f">= {MIN_REASON_WORDS}-word reason (short: {unexplained or 'none'}), at most {MAX_FIXED_AXES} of them "
             f"(got {len(report.fixed_axes)})")
    modes = [m.lower() for m in report.failure_modes()]
    unjustified = [r.name for r in report.custom_rewards if not any(m in r.failure_mode.lower() or r.failure_mode.lower().strip() in m for m in modes if r.failure_mode.strip())]
    if unjustified:
        fail("custom_reward_failure_mode", "custom rewards whose failure_mode names no sub_domain of the report: " + ", ".join(unjustified))
    return fails


def check_weakness_report(path: Path) -> tuple[WeaknessReport | None, GateReport]:
    """Parse and gate a weakness report; the model is None when it does not parse."""
    data, failures = _load_front_matter(path)
    if data is None:
        return None, GateReport.build(GATE, failures)
    try:
        report = WeaknessReport.model_validate(data)
    except ValidationError as e:
        # TODO markers are reported too: a half-filled skeleton usually breaks both.
        return None, GateReport.build(GATE, _todo_failures(data) + _schema_failures(e))
    failures = _todo_failures(data) + report_rule_failures(report)
    stats = {
        "domains": len(report.domains),
        "pairs": len(report.pairs()),
        "bucket_rows_total": sum(b.rows for b in report.buckets),
        "structural_features": len(report.structural_features),
        "custom_reward_weight_total": sum(r.weight for r in report.custom_rewards),
    }
    return report, GateReport.build(GATE, failures, stats)


def _todo_failures(data: dict) -> list[GateFailure]:
    paths = _todo_paths(data)
    if not paths:
        return []
    return [GateFailure(rule="todo_marker", message=f"{len(paths)} placeholder(s) still say {TODO_MARKER}: " + ", ".join(paths))]


# ---------------------------------------------------------------- skeleton


def _render_analysis(analysis: dict) -> str:
    """Human-readable rendering of analysis.json, whatever its keys (tables for lists of records)."""
    if not analysis:
        return "_No analysis inputs were recorded._\n"
    out = []
    for key, value in analysis.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            cols = list(dict.fromkeys(k for v in value for k in v))
            out.append(f"\n### {key}\n\n| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
            out += ["| " + " | ".join(_cell(v.get(c, "")) for c in cols) + " |" for v in value]
            out.append("")
        elif isinstance(value, (dict, list)):
            out.append(f"\n### {key}\n\n```json\n{json.dumps(value, indent=2, default=str)}\n```\n")
        else:
            out.append(f"- **{key}**: {_cell(value)}")
    return "\n".join(out) + "\n"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def render_report_skeleton(eval_acc_prev: float, analysis: dict) -> str:
    """A weakness_report.md to fill in: valid YAML whose placeholders fail the gate until replaced."""
    tmpl = string.Template(project_file(f"templates/{TEMPLATE_NAME}").read_text(encoding="utf-8"))
    return tmpl.substitute(eval_acc_prev=f"{float(eval_acc_prev):.4f}", analysis_section=_render_analysis(analysis))
