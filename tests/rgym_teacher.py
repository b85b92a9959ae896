"""A fixture teacher for envs/si_reasoning_gym (plays the agent in tests/test_reasoning_gym_run.py).

    selfimprove run si-reasoning-gym --env-path envs/si_reasoning_gym --teacher tests/rgym_teacher.py:RgymTeacher

Small on purpose (the full example is examples/arith_teacher.py). One domain per
reasoning-gym task, two sub-domains per domain split by instance size, 100 rows per
bucket. Its generator draws FRESH reasoning-gym instances (seeds no env split uses)
through the env's own `make_rows`, so questions keep the env's format, and drops any
question the engine evaluates or trains on, any failed prompt, and any earlier
iteration's question. Features and axes are measured on each instance, not assigned.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import yaml

# task -> (domain label, reply kind, (short sub-domain, long sub-domain), size key of the entry's metadata, short max)
TASKS = {
    "spell_backward": ("Backward spelling", "text, partial credit",
                       ("short words reversed wrong", "long words reversed wrong"), "word_len", 5),
    "letter_counting": ("Letter counting", "integer, exact",
                        ("short texts miscounted", "long texts miscounted"), "span_length", 4),
    "sentence_reordering": ("Word reordering", "text, partial credit",
                            ("short sentences misordered", "long sentences misordered"), "word_count", 5),
}
FEATURES = {
    "multi character answer": "The expected answer has two or more characters, so a near miss is possible.",
    "several input words": "The input to work on has three or more words.",
    "repeated letter": "Some letter occurs at least twice in the input to work on.",
    "order sensitive answer": "The answer depends on the order of the input's letters or words, not only on counts.",
    "capitals or punctuation": "The input carries an upper-case letter or a punctuation mark the answer must keep.",
}
FIXED_AXES = {
    "cover_story": "reasoning-gym instances are a bare word or a short word list with no story around them",
    "surface": "every question uses the env's single short frame for its task, which the student is scored on",
    "distractor": "no task here carries irrelevant quantities or facts for the student to ignore",
}
ROWS_PER_BUCKET = 100


def task_of(question: str) -> str | None:
    for prefix, task in (("Spell backward:", "spell_backward"), ("Count the letter", "letter_counting"),
                         ("Reorder the words:", "sentence_reordering")):
        if question.startswith(prefix):
            return task
    return None


def report(ctx) -> dict:
    failed = [json.loads(ln) for ln in Path(ctx.failures_path).read_text().splitlines() if ln.strip()]
    per_task = Counter(task_of(f.get("question") or "") for f in failed)
    domains = []
    for k, (task, (label, kind, subs, _key, _cut)) in enumerate(TASKS.items()):
        domains.append({
            "label": label,
            "severity": ("high", "med", "low")[k],
            "evidence": f"{per_task.get(task, 0)} of {len(failed)} failed train prompts ask for {task} ({kind}).",
            "sub_domains": [{"label": s, "failure_mode": f"the reply misses the {task} answer on {s.split()[0]} inputs"}
                            for s in subs],
        })
    return {
        "eval_acc_prev": float(ctx.analysis.get("eval_acc_prev") or 0.0),
        "length_quartile_notes": "Rewards are near zero in every completion-length quartile: the student never "
                                 "learned these tasks, truncation is not the cause.",
        "domains": domains,
        "buckets": [{"domain": d["label"], "sub_domain": s["label"], "rows": ROWS_PER_BUCKET}
                    for d in domains for s in d["sub_domains"]],
        "structural_features": [{"label": k, "definition": v} for k, v in FEATURES.items()],
        "custom_rewards": [],
        "fixed_axes": FIXED_AXES,
    }


GENERATOR = '''
"""Fresh reasoning-gym instances in the env's question format (written by tests/rgym_teacher.py)."""
import json
import string
from pathlib import Path

import si_reasoning_gym as env
from selfimprove.gates.dedup import template_signature
from selfimprove.gates.ngram_hash import question_hashes
from selfimprove.gates.provenance import copy_key

SEED = {seed}
TASKS = {tasks!r}
PER_BUCKET = {per_bucket}
PRIOR = {prior!r}


def payload(task, entry):
    meta = entry["metadata"]
    if task == "spell_backward":
        return meta["word"]
    if task == "letter_counting":
        return " ".join(meta["span"])
    return entry["question"].partition("in the following sentence: ")[2]


def features(task, entry, answer):
    text = payload(task, entry)
    letters = [c.lower() for c in text if c.isalpha()]
    out = []
    if len(answer) >= 2:
        out.append("multi character answer")
    if len(text.split()) >= 3:
        out.append("several input words")
    if len(letters) != len(set(letters)):
        out.append("repeated letter")
    if task != "letter_counting":
        out.append("order sensitive answer")
    if any(c.isupper() or c in string.punctuation for c in text):
        out.append("capitals or punctuation")
    return out


def numbers(task, entry, answer):
    if task == "letter_counting":
        return "count " + (answer if int(answer) < 3 else "3+")
    if task == "sentence_reordering":
        caps = sum(c.isupper() for c in payload(task, entry))
        return f"{{min(caps, 2)}}{{'+' if caps >= 2 else ''}} capitals"
    vowels = sum(c in "aeiouAEIOU" for c in payload(task, entry))
    return f"{{min(vowels, 4)}}{{'+' if vowels >= 4 else ''}} vowels"


# Never generate what the engine evaluates or trains on (the env's default train rows: the first
# eval_examples of them are what verifiers evaluates, there being no eval split), a failed prompt,
# or an earlier iteration's question. Compared the way the gates compare: tokens without case and
# punctuation, and word 8-grams (two shuffles of one sentence can differ only in where a quote
# mark sits); a text task's answer is banned too (a new shuffle of an evaluated sentence is still
# that sentence).
train = env.make_rows(300, seed=0)
failed = [json.loads(ln) for ln in open("failures.jsonl") if ln.strip()]
banned = [r["question"] for r in train] + [f["question"] for f in failed] + PRIOR
banned_keys = {{copy_key(q) for q in banned}}
banned_sigs = {{template_signature(q) for q in banned}}
banned_grams = {{h for q in banned for h in question_hashes(q)}}
banned_answers = {{(r["info"]["task"], r["answer"].casefold()) for r in train if r["info"]["task"] != "letter_counting"}}


def is_banned(row):
    q = row["question"]
    grams = question_hashes(q)
    return (copy_key(q) in banned_keys or template_signature(q) in banned_sigs
            or (row["info"]["task"], row["answer"].casefold()) in banned_answers
            or sum(h in banned_grams for h in grams) >= 0.25 * len(grams))


# The dataset gate's row_fits_student rule: prompt + completion budget within the student's 256 positions
# (a character-level student: a question of 64 characters leaves room for the chat frame).
MAX_QUESTION_CHARS = 64
PREFIXES = {{"spell_backward": "Spell backward:", "letter_counting": "Count the letter",
            "sentence_reordering": "Reorder the words:"}}
origins = {{}}
for f in failed:
    for task, prefix in PREFIXES.items():
        if f["question"].startswith(prefix):
            origins.setdefault(task, []).append((f["step"], f["idx"]))

rows = []
taken = set()
fresh = env.make_rows(3000, seed=SEED)
for task, (domain, subs, key, cut) in TASKS.items():
    cells = {{0: [], 1: []}}
    for r in fresh:
        if (r["info"]["task"] != task or is_banned(r) or copy_key(r["question"]) in taken
                or len(r["question"]) > MAX_QUESTION_CHARS):
            continue
        entry = json.loads(r["info"]["entry"])
        cell = cells[int(entry["metadata"][key] > cut)]
        if len(cell) < PER_BUCKET:
            cell.append((r, entry))
            taken.add(copy_key(r["question"]))
    for s, cell in cells.items():
        assert len(cell) == PER_BUCKET, (task, s, len(cell))
        ranked = sorted(range(PER_BUCKET), key=lambda i: (cell[i][1]["metadata"][key], i))
        level = {{i: "easy" if k < 15 else "med" if k < 50 else "hard" for k, i in enumerate(ranked)}}
        task_origins = origins.get(task, [])
        for i, (r, entry) in enumerate(cell):
            answer = r["answer"]
            skeleton = task_origins and i % 20 < 9
            rows.append({{
                "question": r["question"],
                "answer": answer,
                "info": {{
                    "task": task,
                    "entry": r["info"]["entry"],
                    "domain": domain,
                    "sub_domain": subs[s],
                    "difficulty": level[i],
                    "structural_features": features(task, entry, answer),
                    "source": "skeleton:train_step_{{}}_idx_{{}}".format(*task_origins[i % len(task_origins)])
                              if skeleton else "teacher-invented",
                    "reasoning": f"The {{task.replace('_', ' ')}} answer is {{answer}}.\\n<answer>{{answer}}</answer>",
                    "axes": {{"depth": int(entry["metadata"][key]), "numbers": numbers(task, entry, answer)}},
                }},
            }})

with open("dataset.jsonl", "w") as f:
    for row in rows:
        f.write(json.dumps(row) + "\\n")
'''


class RgymTeacher:
    def __init__(self) -> None:
        self.calls: Counter = Counter()  # per iteration: a re-call (gate feedback) draws fresh seeds

    def write(self, ctx) -> None:
        it = Path(ctx.iter_dir)
        self.calls[ctx.iteration] += 1
        front = report(ctx)
        (it / "weakness_report.md").write_text(
            "---\n" + yaml.safe_dump(front, sort_keys=False) + "---\n\n# Weakness report\n\n"
            "The student earns almost nothing on any of the three reasoning-gym tasks; one domain per task, "
            "split by instance size.\n", encoding="utf-8")
        prior = []
        for d in ctx.prior_iterations:
            ds = Path(d) / "dataset.jsonl"
            if ds.is_file():
                prior += [json.loads(ln)["question"] for ln in ds.read_text().splitlines() if ln.strip()]
        tasks = {t: (label, subs, key, cut) for t, (label, _kind, subs, key, cut) in TASKS.items()}
        (it / "gen_dataset.py").write_text(GENERATOR.format(seed=1000 * ctx.iteration + 100 * self.calls[ctx.iteration] + 7, tasks=tasks,
                                                            per_bucket=ROWS_PER_BUCKET, prior=prior), encoding="utf-8")
        ctx.fill_scratchpad(
            {1: "Rewards are near zero on all three reasoning-gym tasks: the arithmetic student does not know them.",
             3: "One domain per task, two size buckets each, 100 fresh reasoning-gym instances per bucket.",
             4: "Fresh seeds each iteration; evaluated rows, failed prompts and earlier rows are excluded."},
            worked_prev="Nothing measurable: the student gets no reward signal on these tasks." if ctx.iteration > 1 else None,
        )
