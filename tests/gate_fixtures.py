"""Valid baselines for the gate tests: a weakness report and rows that pass every gate.

Each gate test breaks exactly one rule of these baselines and asserts that
exactly that rule fails, so the baselines keep a margin on every bar:
600 rows = 6 buckets x 100 (each 16.7% >= 3%), 50% hard, 15% easy,
100% rows with >= 2 features, 50% with >= 3, every feature in >= 50% of rows,
40% skeleton-sourced, and a distinct template signature per row; every bucket
varies three of the five Pillar 2 axes (cover story, depth 2/3/4, numbers).
Skeleton tags name `failures()`, failed prompts in another sentence frame.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from selfimprove.gates import WeaknessReport

FEATURES = ["unit conversion", "distractor quantity", "nested clause", "multi fact aggregation", "temporal scaling",
            "implicit subtraction", "ratio reasoning"]
DOMAIN_LABELS = ["Multi step totals", "Rate and ratio", "Comparison word problems", "Time and schedule",
                 "Money and change", "Geometry area reasoning", "Sequence pattern tasks"]
SEVERITIES = ["high", "med", "low"]

# Lowercase vocabulary for questions: capitalised words would turn into <name> in signatures.
_ADJ = ["red", "tall", "quiet", "busy", "small", "old", "bright", "heavy", "round", "plain"]
_VERB = ["collects", "sells", "packs", "loads", "sorts", "counts", "stacks", "ships", "stores", "paints"]
_NOUN = ["farmer", "baker", "robot", "sailor", "teacher", "miner", "tailor", "pilot", "clerk", "gardener"]


def sub_label(d: int, s: int) -> str:
    return f"failure mode {d}{'abcde'[s]} dropped"


def report_dict(n_domains: int = 3, subs: int = 2, rows_per_bucket: int = 100, n_features: int = 4) -> dict:
    """Front matter of a valid report (with the defaults): 3 domains x 2 subs x 100 rows, 4 features."""
    domains = []
    for d in range(n_domains):
        domains.append({
            "label": DOMAIN_LABELS[d],
            "severity": SEVERITIES[min(d, 2)],
            "evidence": f"Failed train prompts lose track of quantities in domain {d}.",
            "sub_domains": [{"label": sub_label(d, s), "failure_mode": f"the student drops step {s} of domain {d}"} for s in range(subs)],
        })
    return {
        "eval_acc_prev": 0.31,
        "length_quartile_notes": "Failures spread across quartiles: reasoning, not truncation.",
        "domains": domains,
        "buckets": [{"domain": dom["label"], "sub_domain": sd["label"], "rows": rows_per_bucket} for dom in domains for sd in dom["sub_domains"]],
        "structural_features": [{"label": FEATURES[k], "definition": f"The row needs {FEATURES[k]} to reach the answer."} for k in range(n_features)],
        "custom_rewards": [],
    }


def write_report(path: Path, front_matter: dict | None, body: str = "\n# Weakness report\n\nProse for humans.\n") -> Path:
    text = ("---\n" + yaml.safe_dump(front_matter, sort_keys=False) + "---\n" if front_matter is not None else "") + body
    path.write_text(text, encoding="utf-8")
    return path


def valid_report(**kwargs) -> WeaknessReport:
    return WeaknessReport.model_validate(report_dict(**kwargs))


def make_question(g: int, a: int, b: int) -> str:
    """A question whose template signature is unique for g < 1000 (adjective/verb/noun vary with g)."""
    return (f"A {_ADJ[(g // 100) % 10]} {_NOUN[g % 10]} {_VERB[(g // 10) % 10]} {a} crates in the morning "
            f"and {b} crates after lunch; how many crates are handled that day?")


def make_rows(report: WeaknessReport | None = None, per_bucket: int = 100, pairs: list[tuple[str, str]] | None = None,
              skeleton_origins: list[tuple[int, int]] | None = None) -> list[dict]:
    """Rows that pass every dataset rule for `report` (default: valid_report()).

    Skeleton rows are tagged with `skeleton_origins` in turn (default: those of `failures()`)."""
    origins = skeleton_origins or [(f["step"], f["idx"]) for f in failures()]
    report = report or valid_report()
    feats = [f.label for f in report.structural_features]
    if pairs is None:
        pairs = [(d.label, s.label) for d in report.domains for s in d.sub_domains]
    rows = []
    for p, (dom, sub) in enumerate(pairs):
        for i in range(per_bucket):
            g = p * per_bucket + i
            a, b = 10 + (g * 7) % 90, 3 + (g * 13) % 50
            k = 3 if i % 2 == 0 else 2
            rows.append({
                "question": make_question(g, a, b),
                "answer": str(a + b),
                "info": {
                    "domain": dom,
                    "sub_domain": sub,
                    "difficulty": "easy" if i % 20 < 3 else "med" if i % 20 < 10 else "hard",
                    "structural_features": [feats[(i + j) % len(feats)] for j in range(k)],
                    "source": "skeleton:train_step_{}_idx_{}".format(*origins[i % len(origins)]) if i % 5 < 2 else "teacher-invented",
                    "reasoning": f"Morning {a} plus afternoon {b} gives {a + b}.\n<answer>{a + b}</answer>",
                    "axes": {"cover_story": _NOUN[g % 10], "depth": 2 + i % 3, "surface": "one sentence",
                             "numbers": "carry" if a % 10 + b % 10 >= 10 else "no carry", "distractor": False},
                },
            })
    return rows


def failures(n: int = 40, step: int = 100) -> list[dict]:
    """Rows of failures.jsonl (the failed TRAIN prompts skeleton rows paraphrase): another frame than make_rows."""
    return [{"rank": k, "step": step, "idx": k, "reward": 0.0,
             "question": f"The warehouse received {k + 11} parcels and shipped {k % 9 + 2} before noon; how many stay?"}
            for k in range(n)]


_NAMES = [("Sally", "her"), ("Tom", "his"), ("Priya", "her"), ("Kenji", "his"), ("Amara", "her")]


def prior_rows(n: int = 300) -> list[dict]:
    """Rows of an earlier iteration: another sentence frame, so no signature collides with make_rows."""
    rows = []
    for k in range(n):
        name, pron = _NAMES[k % 5]
        rows.append({"question": f"{name} the {_NOUN[k % 10]} had {k + 5} boxes and gave {k % 7 + 1} of them to {pron} neighbour; what remains?",
                     "answer": str(k + 5 - (k % 7 + 1)), "info": {}})
    return rows


def alias(question: str) -> str:
    """The seed's forbidden alias: 'Sally->Sarah, 5->7' (name, pronoun and numbers swapped)."""
    for old, new in [("Sally", "Sarah"), ("Tom", "Omar"), ("Priya", "Lena"), ("Kenji", "Ravi"), ("Amara", "Noor"),
                     (" her ", " his "), (" had ", " had 1"), ("gave ", "gave 2")]:
        question = question.replace(old, new)
    return question


def clone(obj):
    return copy.deepcopy(obj)
