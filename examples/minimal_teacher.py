"""The smallest complete teacher for `selfimprove-arith`: the tool's weakness statistics, SKILL.md's allocation.
It serves the embedded arithmetic env only, and refuses any other env in one line before writing anything.

    selfimprove run selfimprove-arith --teacher examples/minimal_teacher.py:MinimalTeacher

It reads nothing the tool did not measure: `ctx.weakness["real"]` (iter_0's solve rate per
prompt group over its whole run, classed never / rare / learning / solved) and failures.jsonl
(to tag paraphrases). It spends the rows as SKILL.md says: rare groups get most of them (drill),
never groups get stepping stones (the same skeleton with one number a digit shorter, or the
last term dropped: easier, so the student sometimes solves them), learning groups some, solved
groups none. The only arithmetic here is the solver and the row features; the default grouping
(numbers as one `#` per digit) already names each structure, e.g. `###+#`.
The generator imports `build_rows` from this file, so the rows the teacher plans are the rows written.
"""

import json
from collections import Counter
import random
import re
from pathlib import Path

TOTAL_ROWS = 800
CLASS_SHARE = {"rare": 0.5, "never": 0.35, "learning": 0.15}  # SKILL.md: rare most, never stones, learning some
FEATURES = {  # label -> (definition, test on the numbers, operators and result of one row)
    "three-digit operand": ("An operand with three or more digits.", lambda ns, ops, r: max(map(len, ns)) >= 3),
    "uneven operand widths": ("Operands have different numbers of digits.", lambda ns, ops, r: len(set(map(len, ns))) > 1),
    "three operands": ("Three or more numbers, so a partial result must be held.", lambda ns, ops, r: len(ns) >= 3),
    "subtraction": ("A minus sign between operands.", lambda ns, ops, r: "-" in ops),
    "result width change": ("The result is wider or narrower than the widest operand.",
                            lambda ns, ops, r: len(str(abs(r))) != max(map(len, ns))),
    "carry or borrow": ("A column carries or borrows.", lambda ns, ops, r: _carries(ns, ops)),
    "single-digit operand": ("A one-digit operand that must be aligned under the ones column.",
                             lambda ns, ops, r: min(map(len, ns)) == 1),
    "zero digit": ("A 0 digit in an operand or the result, a place-holding slip.", lambda ns, ops, r: "0" in "".join(ns) + str(r)),
}
FIXED_AXES = {"cover_story": "the real questions are bare arithmetic expressions without stories",
              "surface": "the real questions have one written form and the eval shows only it",
              "distractor": "a bare expression has no room for irrelevant information",
              "depth": "each bucket is one structure so its number of operations is fixed"}


def _carries(ns, ops):
    acc = int(ns[0])
    for op, n in zip(ops, ns[1:]):
        a, b = str(abs(acc)).zfill(12), n.zfill(12)
        if any(int(x) + int(y) >= 10 if op == "+" else int(x) < int(y) for x, y in zip(a, b)):
            return True
        acc = acc + int(n) if op == "+" else acc - int(n)
    return False


def solve(question):
    """The exact value of a bare + / - expression (the embedded env's questions)."""
    if not re.fullmatch(r"\d+([+-]\d+)*", question):
        raise ValueError(f"not a bare +/- expression: {question!r}")
    return sum(int(t) for t in re.findall(r"[+-]?\d+", question))


def stepping_stones(group, known):
    """Easier skeletons of `group` that the real split lacks: one number a digit shorter, or the last term dropped."""
    slots = re.findall(r"#+|[^#]+", group)
    out = ["".join(s[:-1] if i == j else s for j, s in enumerate(slots)) for i, s in enumerate(slots) if s[0] == "#" and len(s) > 1]
    if len(re.findall("#+", group)) >= 3:
        out.append(re.sub(r"[+-]#+$", "", group))
    return [g for g in dict.fromkeys(out) if g not in known]


def build_rows(plan):
    """Rows for each bucket of the plan: fresh numbers in the bucket's skeleton, solved exactly."""
    rng, seen, rows = random.Random(plan["seed"]), set(plan["avoid"]), []
    for b in plan["buckets"]:
        made = 0
        for _ in range(200 * b["rows"]):
            if made == b["rows"]:
                break
            q = re.sub(r"#+", lambda m: str(rng.randint(10 ** (len(m.group()) - 1) if len(m.group()) > 1 else 1, 10 ** len(m.group()) - 1)), b["skeleton"])
            if q in seen:
                continue
            seen.add(q)
            made += 1
            ns, ops, value = re.findall(r"\d+", q), re.findall(r"[+-]", q), solve(q)
            feats = [f for f in plan["features"] if FEATURES[f][1](ns, ops, value)]
            numbers = ("zero digit" if "0" in q + str(value) else "no zero") + ("; wide result" if len(str(abs(value))) > max(map(len, ns)) else "")
            rows.append({"question": q, "answer": str(value), "info": {
                "domain": b["domain"], "sub_domain": b["sub_domain"], "difficulty": b["difficulty"],
                "structural_features": feats, "source": b["sources"][made % len(b["sources"])],
                "reasoning": f"{q} = {value}\n<{plan['tag']}>{value}</{plan['tag']}>",
                "axes": {"cover_story": "none", "depth": len(ns) - 1, "surface": "bare expression", "numbers": numbers, "distractor": False}}})
    return rows


def refuse_other_envs(hub_env):  # grouping, stones and solver are arithmetic-only: say so in one line, before any work
    other = [s["question"] for s in hub_env.get("train_samples") or [] if not re.fullmatch(r"\d+([+-]\d+)*", s["question"].strip())]
    if other:
        from selfimprove.errors import TeacherError
        raise TeacherError(f"examples/minimal_teacher.py serves selfimprove-arith (bare +/- expressions such as 47+38) only; env '{hub_env.get('env_id')}' asks e.g. {other[0][:60]!r}: use --teacher llm:MODEL, a coding agent (docs/how-to/coding-agent.md), or a teacher of your own (docs/how-to/write-teacher.md)")


class MinimalTeacher:
    def write(self, ctx):
        from selfimprove.teacher import Bucket, Domain, Feature, SubDomain, WeaknessReport, write_weakness_report

        refuse_other_envs(ctx.hub_env)
        groups = (ctx.weakness or {}).get("real", {}).get("groups", [])
        known = {g["group"] for g in groups}
        targets = [g for g in groups if g["class"] in CLASS_SHARE][:6]
        targets += [g for g in groups if g["class"] == "solved"][: max(0, 3 - len(targets))]  # the gate wants >= 3 domains
        failures = [json.loads(line) for line in ctx.failures_path.read_text().splitlines() if line.strip()]
        shares = {c: s for c, s in CLASS_SHARE.items() if any(g["class"] == c for g in targets)}
        cls_of = {g["group"]: g["class"] if g["class"] in shares else "learning" for g in targets}
        # From iteration 2: how the last rows went (iter_N-1 on them). A group they taught (late rate >= 50%) needs
        # fewer rows, one still rare on them more. Every iteration restarts from iter_0, so none drops to zero.
        prev = {g["group"]: g["late_rate"] for g in ((ctx.weakness or {}).get("previous") or {}).get("groups", [])}
        weight = {k: shares[c] / sum(v == c for v in cls_of.values()) * (1.0 if prev.get(k) is None else 0.5 if prev[k] >= 0.5 else 1.5)
                  for k, c in cls_of.items()}
        buckets, domains = [], []
        for g in targets:
            cls = cls_of[g["group"]]
            rows = TOTAL_ROWS * weight[g["group"]] / sum(weight.values())
            tags = [f"skeleton:train_step_{f['step']}_idx_{f['idx']}" for f in failures if f.get("group") == g["group"]] or ["teacher-invented"]
            if cls == "never":  # stones the student can sometimes solve, and the hard form itself for when they lift it
                subs = [(f"stepping stone {s}", s) for s in stepping_stones(g["group"], known)[:2]] + [("hard form drill", g["group"])]
            else:
                subs = [("paraphrased failures", g["group"])]
            subs += [("fresh instances", g["group"])] if len(subs) < 2 else []
            label = f"{'stones for' if cls == 'never' else cls} {g['group']}"
            for sub, skel in subs:  # a never group's hard form gets half its rows, its stones the rest
                part = 0.5 if sub == "hard form drill" and len(subs) > 2 else 0.25 if len(subs) > 2 else 1 / len(subs)
                buckets.append({"domain": label, "sub_domain": sub, "skeleton": skel, "rows": max(30, round(rows * part)),
                                "difficulty": "hard" if skel == g["group"] and g["solve_rate"] < 0.35 else "med",
                                "sources": ["teacher-invented"] if sub == "fresh instances" else tags})
            domains.append(Domain(label=label, severity="high" if cls in ("rare", "never") else "med",
                                  evidence=f"iter_0 solved {g['group']} prompts in {g['solve_rate']:.1%} of {g['rollouts']} train rollouts.",
                                  sub_domains=[SubDomain(label=s, failure_mode=f"{cls}: {g['group']} answered wrong") for s, _ in subs]))
        prior = [json.loads(line)["question"] for d in ctx.prior_iterations if (d / "dataset.jsonl").is_file()
                 for line in (d / "dataset.jsonl").read_text().splitlines() if line.strip()]
        plan = {"seed": 1000 * ctx.iteration + (7 if ctx.feedback else 0), "tag": ctx.hub_env["parser_config"]["answer_field"],
                "avoid": sorted(set(prior) | {f["question"] for f in failures}), "features": list(FEATURES), "buckets": buckets}
        rows = build_rows(plan)
        used = {f: sum(f in r["info"]["structural_features"] for r in rows) / len(rows) for f in FEATURES}
        plan["features"] = [f for f in sorted(FEATURES, key=lambda f: -used[f]) if used[f] >= 0.12][:6]
        counts = Counter((r["info"]["domain"], r["info"]["sub_domain"]) for r in build_rows(plan))  # the rows written
        report = WeaknessReport(
            eval_acc_prev=ctx.analysis["eval_acc_prev"],
            length_quartile_notes="no truncation: every failure is a wrong value, not a cut-off reply.",
            domains=sorted(domains, key=lambda d: d.severity != "high"), fixed_axes=FIXED_AXES,
            buckets=[Bucket(domain=d, sub_domain=s, rows=n) for (d, s), n in counts.items()],
            structural_features=[Feature(label=f, definition=FEATURES[f][0]) for f in plan["features"]])
        write_weakness_report(ctx.iter_dir / "weakness_report.md", report,
                              "Rows follow the weakness classes: rare groups drilled, never groups via stepping stones.")
        (ctx.iter_dir / "gen_dataset.py").write_text(
            f"import json, sys\nsys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\nfrom minimal_teacher import build_rows\n"
            f"rows = build_rows(json.loads({json.dumps(plan)!r}))\n"
            "with open('dataset.jsonl', 'w') as f:\n    f.writelines(json.dumps(r) + '\\n' for r in rows)\n")
        ctx.fill_scratchpad({1: "Weakness classes of iter_0: " + ", ".join(f"{g['group']} {g['class']} {g['solve_rate']:.1%}" for g in targets),
                             3: f"{len(rows)} rows: " + ", ".join(f"{b['domain']} / {b['sub_domain']} {b['rows']}" for b in buckets),
                             4: "none (canonical hyperparameters)"},
                            worked_prev=f"iter_{ctx.iteration - 1} reached eval_acc {ctx.analysis['eval_acc_prev']:.3f}" if ctx.iteration > 1 else None)

