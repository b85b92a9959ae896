"""A teacher for any env whose rows are made by code: the env's module exposes `TASKS` (the task names
its rows carry in `info.task`) and `make_row(task, rng)` (one fresh row of that task). The env that
`selfimprove new-env NAME` writes does; on any other env this teacher refuses in one line before
writing anything.

    selfimprove new-env my-env && pip install -e ./my-env
    selfimprove run my-env --model build:my-env --teacher examples/codegen_teacher.py:CodegenTeacher

It is a template to copy: the allocation is the minimal teacher's (examples/minimal_teacher.py),
and the rows come from the env's own generator, so the teacher writes no solver. What it reads:

- `ctx.weakness["real"]`: iter_0's solve rate per prompt group, classed never / rare / learning /
  solved. With the default grouping a group is a task (the rows' `info.task`). Rare groups get most
  rows (drill), learning groups a few, solved groups none (unless fewer than three groups are left:
  the report gate wants >= 3 domains). A never group, and a solved one kept only for the three
  domains, get only the report gate's minimum while a rare or learning group is targeted:
  `make_row` has no easier variant, and rows the student never solves give GRPO no gradient
  (SKILL.md; measured on si-reasoning-gym, docs/results.md).
- From iteration 2, `ctx.weakness["previous"]`: a group the last rows taught gets fewer rows.
- `failures.jsonl`: failed prompts per group, for the skeleton tags of the drill sub-domain (a
  fresh row of the same task keeps the failed prompt's skeleton) and to never copy one.

Row labels are measured on each generated row, never assigned: difficulty by the row's length
within its bucket (longer inputs are harder for a small model), structural features from the
answer's and question's characters, the `numbers` axis from their lengths. Every row has the
env's own frame, so cover story, surface and distractor cannot vary (`FIXED_AXES` says why), nor
depth (one operation per row). An env where these generic labels do not vary fails the dataset
gate with the rule named: then copy this file and measure what your rows vary in.

The generator (`iter_N/gen_dataset.py`) imports `build_rows` from this file and the env's module,
so the rows planned are the rows written (it runs in the env's Python, which must import both).
"""

import importlib
import json
import random
from collections import Counter
from pathlib import Path

TOTAL_ROWS = 800
CLASS_SHARE = {"rare": 0.5, "never": 0.35, "learning": 0.15}  # SKILL.md: rare most, never some, learning a few
MIN_BUCKET_ROWS = 30  # the report gate wants every bucket >= 3% of the rows (24 of 800)
DRILL, FRESH = "drill on failed prompts", "fresh instances"
FEATURES = {  # label -> (definition, test on (question, answer))
    "multi character answer": ("The answer has two or more characters, so a partial slip is possible.",
                               lambda q, a: len(a) >= 2),
    "answer not in question": ("The answer is not written in the question: it must be computed.",
                               lambda q, a: a not in q),
    "letters only answer": ("The answer is letters only.", lambda q, a: a.isalpha()),
    "digits in question": ("The question holds digits.", lambda q, a: any(c.isdigit() for c in q)),
    "long answer": ("The answer has five or more characters.", lambda q, a: len(a) >= 5),
    "repeated character": ("A character occurs twice or more in the answer.", lambda q, a: len(set(a)) < len(a)),
    "reordered characters": ("The answer's characters are all in the question, but not in that order.",
                             lambda q, a: a not in q and len(a) >= 2 and all(c in q for c in a)),
}
FIXED_AXES = {"cover_story": "the env's questions are a bare task frame without any story",
              "surface": "each task has one written frame and the eval shows only it",
              "distractor": "a bare task frame has no room for irrelevant information",
              "depth": "every row asks one operation of its task, never a chain of them"}


def env_module_name(env_id: str) -> str:
    """owner/my-env@1.0 -> my_env: the module `load_environment` lives in."""
    return env_id.split("/")[-1].split("@")[0].replace("-", "_")


def refuse_other_envs(hub_env):
    """The env's module, if it makes rows by code (TASKS, make_row); else one line saying what to use."""
    env_id = str(hub_env.get("env_id") or "")
    try:
        module = importlib.import_module(env_module_name(env_id))
    except Exception:  # noqa: BLE001  (not importable here, or broken: either way not an env this teacher serves)
        module = None
    if module is None or not isinstance(getattr(module, "TASKS", None), (tuple, list, dict)) or not callable(getattr(module, "make_row", None)):
        from selfimprove.errors import TeacherError
        raise TeacherError(f"examples/codegen_teacher.py serves envs whose module exposes TASKS and make_row(task, rng) "
                           f"(as `selfimprove new-env` writes) only; env '{env_id}' has no such module here: use "
                           "--teacher llm:MODEL, a coding agent (docs/how-to/coding-agent.md), or a teacher of your own "
                           "(docs/how-to/write-teacher.md)")
    return module


def measure(question, answer):
    """(structural features, numbers-axis label) of one row: what the row is, not what the plan said."""
    features = [f for f, (_, test) in FEATURES.items() if test(question, answer)]
    kind = "digit" if answer.isdigit() else "letter" if answer.isalpha() else "mixed"
    return features, f"{len(answer)}-char {kind} answer, {len(question)}-char question"


def build_rows(plan):
    """Fresh rows of each bucket's task from the env's own `make_row`, seeded, never a question in plan['avoid']."""
    make_row = importlib.import_module(plan["module"]).make_row
    rng, seen, rows = random.Random(plan["seed"]), set(plan["avoid"]), []
    for b in plan["buckets"]:
        made = []
        for _ in range(200 * b["rows"]):
            if len(made) == b["rows"]:
                break
            row = make_row(b["task"], rng)
            if row["question"] not in seen:
                seen.add(row["question"])
                made.append(row)
        # Difficulty by length within the bucket: the shortest 15% easy, the next 35% med, the rest hard
        # (the dataset gate wants >= 40% hard and <= 20% easy).
        rank = sorted(range(len(made)), key=lambda i: (len(made[i]["question"]) + len(made[i]["answer"]), i))
        level = {i: "easy" if k < 0.15 * len(made) else "med" if k < 0.5 * len(made) else "hard" for k, i in enumerate(rank)}
        for i, row in enumerate(made):
            question, answer = row["question"], str(row["answer"])
            features, numbers = measure(question, answer)
            rows.append({"question": question, "answer": answer, "info": {
                **row.get("info", {}), "domain": b["domain"], "sub_domain": b["sub_domain"], "difficulty": level[i],
                "structural_features": [f for f in features if f in plan["features"]],
                "source": b["sources"][i % len(b["sources"])],
                "reasoning": f"The {b['task']} answer is {answer}.\n<{plan['tag']}>{answer}</{plan['tag']}>",
                "axes": {"cover_story": "none", "depth": 1, "surface": "task frame", "numbers": numbers,
                         "distractor": False}}})
    return rows


def task_of(group, tasks):
    """The env task a weakness group stands for: the task grouping labels groups `task=NAME` (grouping.py)."""
    name = group.partition("=")[2] if "=" in group else group
    return name if name in tasks else None


def plan_buckets(groups, tasks, failures, previous):
    """Buckets: rows per weak task, split into a drill on its failures and fresh instances."""
    groups = [g for g in groups if task_of(g["group"], tasks)]
    targets = [g for g in groups if g["class"] in CLASS_SHARE][:6]
    targets += [g for g in groups if g["class"] == "solved"][: max(0, 3 - len(targets))]
    cls_of = {g["group"]: g["class"] if g["class"] in CLASS_SHARE else "learning" for g in targets}
    shares = {c: s for c, s in CLASS_SHARE.items() if c in cls_of.values()}
    # A group the previous rows taught (late rate >= 50%) gets fewer rows, one still failing more.
    weight = {k: shares[c] / sum(v == c for v in cls_of.values()) * (1.0 if previous.get(k) is None else 0.5 if previous[k] >= 0.5 else 1.5)
              for k, c in cls_of.items()}
    # Never groups, and solved ones only there to make three domains: the gate's minimum (two buckets of
    # MIN_BUCKET_ROWS) while a rare or learning group can use the rows.
    floor = ({g["group"] for g in targets if g["class"] in ("never", "solved")}
             if any(g["class"] in ("rare", "learning") for g in targets) else set())
    spare = TOTAL_ROWS - 2 * MIN_BUCKET_ROWS * len(floor)
    buckets = []
    for g in targets:
        task, cls = task_of(g["group"], tasks), cls_of[g["group"]]
        rows = 2 * MIN_BUCKET_ROWS if g["group"] in floor else \
            spare * weight[g["group"]] / sum(w for k, w in weight.items() if k not in floor)
        tags = [f"skeleton:train_step_{f['step']}_idx_{f['idx']}" for f in failures if f.get("group") == g["group"]]
        label = f"{cls} {task}"
        for sub, sources in ((DRILL, tags or ["teacher-invented"]), (FRESH, ["teacher-invented"])):
            buckets.append({"task": task, "domain": label, "sub_domain": sub, "sources": sources,
                            "rows": max(MIN_BUCKET_ROWS, round(rows / 2)), "group": g, "class": cls})
    return buckets


class CodegenTeacher:
    def write(self, ctx):
        from selfimprove.errors import TeacherError
        from selfimprove.teacher import Bucket, Domain, Feature, SubDomain, WeaknessReport, write_weakness_report

        module = refuse_other_envs(ctx.hub_env)
        tasks = [str(t) for t in module.TASKS]
        groups = (ctx.weakness or {}).get("real", {}).get("groups", [])
        if not any(task_of(g["group"], tasks) for g in groups):
            raise TeacherError(f"examples/codegen_teacher.py: no weakness group of iteration {ctx.iteration} is one of the "
                               f"env's tasks ({', '.join(tasks)}); run with --group-by task so groups are tasks")
        failures = [json.loads(line) for line in ctx.failures_path.read_text().splitlines() if line.strip()]
        previous = {g["group"]: g["late_rate"] for g in ((ctx.weakness or {}).get("previous") or {}).get("groups", [])}
        buckets = plan_buckets(groups, tasks, failures, previous)
        prior = [json.loads(line)["question"] for d in ctx.prior_iterations if (d / "dataset.jsonl").is_file()
                 for line in (d / "dataset.jsonl").read_text().splitlines() if line.strip()]
        plan = {"module": module.__name__, "seed": 1000 * ctx.iteration + (7 if ctx.feedback else 0),
                "tag": ctx.hub_env["parser_config"]["answer_field"], "features": list(FEATURES),
                "avoid": sorted(set(prior) | {f["question"] for f in failures}),
                "buckets": [{k: v for k, v in b.items() if k not in ("group", "class")} for b in buckets]}
        rows = build_rows(plan)
        used = {f: sum(f in r["info"]["structural_features"] for r in rows) / len(rows) for f in FEATURES}
        plan["features"] = [f for f in sorted(FEATURES, key=lambda f: -used[f]) if used[f] >= 0.12][:6]
        counts = Counter((r["info"]["domain"], r["info"]["sub_domain"]) for r in build_rows(plan))  # the rows written
        domains = []
        for b in buckets[::2]:  # one domain per task: its drill bucket carries the group's figures
            g, cls = b["group"], b["class"]
            domains.append(Domain(
                label=b["domain"], severity="high" if cls in ("rare", "never") else "med",
                evidence=f"iter_0 solved {b['task']} prompts in {g['solve_rate']:.1%} of {g['rollouts']} train rollouts.",
                sub_domains=[SubDomain(label=DRILL, failure_mode=f"{cls}: the failed {b['task']} prompts, new instances"),
                             SubDomain(label=FRESH, failure_mode=f"{cls}: {b['task']} answered wrong in general")]))
        report = WeaknessReport(
            eval_acc_prev=ctx.analysis["eval_acc_prev"],
            length_quartile_notes="Rows are short and the answers shorter; failures are wrong answers, not cut-off replies.",
            domains=sorted(domains, key=lambda d: d.severity != "high"), fixed_axes=FIXED_AXES,
            buckets=[Bucket(domain=d, sub_domain=s, rows=n) for (d, s), n in counts.items()],
            structural_features=[Feature(label=f, definition=FEATURES[f][0]) for f in plan["features"]])
        write_weakness_report(ctx.iter_dir / "weakness_report.md", report,
                              "Rows follow the weakness classes of the env's tasks, made by the env's own generator.")
        (ctx.iter_dir / "gen_dataset.py").write_text(
            f"import json, sys\nsys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\nfrom codegen_teacher import build_rows\n"
            f"rows = build_rows(json.loads({json.dumps(plan)!r}))\n"
            "with open('dataset.jsonl', 'w') as f:\n    f.writelines(json.dumps(r) + '\\n' for r in rows)\n")
        ctx.fill_scratchpad({1: "Weakness classes of iter_0 by task: " + ", ".join(
                                 f"{b['task']} {b['class']} {b['group']['solve_rate']:.1%}" for b in buckets[::2]),
                             3: f"{sum(counts.values())} rows from the env's make_row: " + ", ".join(
                                 f"{d} / {s} {n}" for (d, s), n in counts.items()),
                             4: "none (canonical hyperparameters)"},
                            worked_prev=f"iter_{ctx.iteration - 1} reached eval_acc {ctx.analysis['eval_acc_prev']:.3f}" if ctx.iteration > 1 else None)

