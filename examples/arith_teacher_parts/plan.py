"""The planner: one pass from the iteration's inputs to the rows gen_dataset.py will write.

`ArithTeacher.plan` (teacher.py) runs `_Planner(...).run()`, which goes through
five steps, each a group of methods below:

1. read_inputs: failures.jsonl, the anchor's train rollouts (iter_0's last
   steps), the TRAIN split's questions, earlier iterations' questions (observe.py);
2. measure_structures: success, share, mixed-outcome share and learnability of
   every structure seen (a Cell per structure, cells.py; allocate.severity_score);
3. choose_domains: per structure, cells by carry class with enough fresh
   instances (capacity: the train-split pool, or fresh samples within the
   eval-collision budget), stepping-stone domains for hopeless structures that
   cannot be drilled, then the 3-6 domains by weighted severity;
4. allocate: rows per bucket (allocate.py) and the failed prompts each bucket
   paraphrases (its anchors);
5. pilot_and_rebalance, finish: build pilot rows with rows.build_rows, choose the
   features and move rows until the skill's procedure's bars hold, then the generator's PLAN
   (gen_plan, what gen_dataset.py embeds) and its rows, as a Plan (cells.py).

No file is written here; teacher.py writes the report and the generator.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from .allocate import _choose_features, _feature_lift, _metrics, _rebalance, _round_alloc, rescue_weights, severity_score
from .cells import Cell, DomainPlan, Plan, PlanError, _structure_label, _sub_label, stone_space, stone_variants
from .expr import carry_class, carry_vector, leaves, parse_expr, render, shape_of, signs_of, value, with_leaves
from .observe import Obs, _majority_frame, _prior_questions, _ranges, read_failures, read_rollouts
from .report import _evidence
from .rows import build_rows
from .settings import (
    ALLOC_EXPONENTS,
    BARS,
    BUCKET_FLOOR,
    FEATURE_CATALOGUE,
    FREE_RISK_MAX,
    HARD_FOR_STUDENT,
    HOPELESS_P,
    POOL_MARGIN,
    STONE_VALUE,
)

if TYPE_CHECKING:
    from .teacher import ArithTeacher


def _answer_tag(hub_env: dict) -> str:
    cls = (hub_env or {}).get("parser_class") or "XMLParser"
    if cls != "XMLParser":
        raise PlanError(f"arith_teacher writes XML answer tags; the hub parser is {cls}")
    cfg = (hub_env or {}).get("parser_config") or {}
    field_ = cfg.get("answer_field") or (cfg.get("fields") or ["answer"])[-1]
    return field_[0] if isinstance(field_, list) else str(field_)



class _Planner:
    """One planning pass: inputs -> structures -> domains -> buckets -> rows (see the module docstring)."""

    def __init__(self, teacher: "ArithTeacher", ctx, offset: int, strict: bool, rules: set[str], widen: int = 0,
                 stones: bool = True):
        self.teacher, self.ctx, self.offset, self.rules, self.widen = teacher, ctx, offset, rules, widen
        self.stones = stones
        self.n_iter = int(ctx.iteration)
        self.run_dir = Path(ctx.run_dir)
        self.tag = _answer_tag(ctx.hub_env)
        self.notes: list[str] = []
        self.bars = {k: (v - 0.05 if k == "easy" else v + 0.05) for k, v in BARS.items()} if strict else dict(BARS)
        self.floor_share = BUCKET_FLOOR + (0.01 if rules & {"seed_smallest_bucket", "bucket_floor"} else 0.0)
        self.total = teacher.total_rows
        self.exponent = ALLOC_EXPONENTS[(self.n_iter - 1) % len(ALLOC_EXPONENTS)]
        self.seed = self.n_iter * 1000 + offset
        self._space: dict = {}

    def run(self) -> Plan:
        self.read_inputs()
        self.measure_structures()
        self.choose_domains()
        self.allocate()
        self.pilot_and_rebalance()
        return self.finish()

    # 1. inputs ----------------------------------------------------------

    def read_inputs(self) -> None:
        ctx = self.ctx
        self.failures, self.fail_skipped = read_failures(ctx.failures_path)
        self.anchor, self.anchor_steps = read_rollouts(self.run_dir / "iter_0")
        self.anchor_src = "iter_0"
        if not self.anchor and self.n_iter > 1:
            self.anchor, self.anchor_steps = read_rollouts(self.run_dir / f"iter_{self.n_iter - 1}")
            self.anchor_src = f"iter_{self.n_iter - 1}"
        if not self.anchor:
            self.notes.append("no train rollouts found: severity falls back to failure counts (learnability not measurable)")
        self.source = self.anchor or self.failures
        if not self.source:
            raise PlanError(f"{ctx.failures_path}: no failed train rollout is an arithmetic expression")
        self.train_qs, self.train_src = self.teacher._load_train_questions(ctx, self.anchor)
        self.train_obs = self.teacher._train_index(self.train_qs)
        self.n_train = sum(len(v) for v in self.train_obs.values())
        self.prior = _prior_questions(ctx.prior_iterations)
        self.avoid = sorted({o.question for o in self.failures})
        self.excluded = set(self.prior) | set(self.avoid)
        self.frame = _majority_frame([o.question for o in self.source] or self.train_qs)
        self.eval_size = int((ctx.hub_env or {}).get("eval_size") or 1000)

    # 2. structures ------------------------------------------------------

    def measure(self, cell: Cell) -> None:
        """Rollout count, success, frequency, mixed-outcome share and failure rows of a cell."""
        rows = [o for o in self.anchor if cell.match(o)]
        cell.n, cell.succ = len(rows), sum(o.reward for o in rows)
        cell.freq = len(rows) / (len(self.anchor) or 1)
        cell.failures = [o for o in self.failures if cell.match(o)]
        groups: dict = defaultdict(list)
        for o in rows:
            groups[(o.step, o.example_id if o.example_id is not None else o.question)].append(o.ok)
        multi = [g for g in groups.values() if len(g) > 1]
        cell.mixed = sum(1 for g in multi if 0 < sum(g) < len(g)) / len(multi) if multi else None
        if not self.anchor:  # no rollouts: the share of failures stands in for frequency x learnability
            cell.freq = len(cell.failures) / (len(self.failures) or 1)

    def measure_structures(self) -> None:
        self.struct: dict[str, Cell] = {}
        for k in sorted({o.key for o in self.source}):
            c = Cell(k, {})
            self.measure(c)
            c.p = (c.succ + 0.5) / (c.n + 1)
            c.score = severity_score(c.p) if self.anchor else 1.0
            c.weight = c.freq * c.score
            c.example = next(o.node for o in self.source if o.key == k)
            self.struct[k] = c

    def template_obs(self, key: str) -> list[Obs]:
        return self.train_obs.get(key) or [o for o in self.source if o.key == key]

    def sample_space(self, key: str) -> tuple[float, list[tuple[int, bool]]]:
        """(size of the structure's space in its observed operand ranges, (cls, zero) of sampled instances)."""
        if key not in self._space:
            obs = self.template_obs(key)
            ranges, tmpl = _ranges(obs), obs[0].node
            rng = random.Random(f"space:{key}")
            draws, hits = 600, []
            shape, signs = key.split("|")
            for _ in range(draws):
                node = with_leaves(tmpl, [rng.randint(lo, hi) for lo, hi in ranges])
                if shape_of(node) == shape and signs_of(node) == signs:
                    d = [str(x) for x in leaves(node)] + [str(abs(value(node)))]
                    hits.append((carry_class(node), "0" in "".join(d)))
            size = math.prod(hi - lo + 1 for lo, hi in ranges) * len(hits) / draws
            self._space[key] = (size, hits)
        return self._space[key]

    def capacity(self, cell: Cell) -> None:
        """How many rows a cell can take: fresh train-split instances, or fresh samples within the eval-risk budget."""
        cell.pool = sorted({o.expr for o in self.train_obs.get(cell.key, []) if cell.match(o) and o.question not in self.excluded})
        size, hits = self.sample_space(cell.key)
        in_cell = sum(1 for cls, zero in hits if cell.cons.get("cls", cls) == cls and cell.cons.get("zero", zero) == zero)
        key_share = len(self.train_obs.get(cell.key, [])) / self.n_train if self.n_train else self.struct[cell.key].freq
        risk_row = self.eval_size * key_share / size if size else 1.0  # chance that a fresh sample is an eval question
        budget = FREE_RISK_MAX / (4 if "eval_overlap" in self.rules else 1)  # the gate saw a collision: be stricter
        cell.free_cap = int(budget / risk_row) if in_cell and risk_row > 0 else 0
        cell.cap = max(int(len(cell.pool) / POOL_MARGIN), cell.free_cap)

    # 3. domains ---------------------------------------------------------

    def make_cell(self, key: str, cons: dict, floor_rows: int) -> Cell | None:
        c = Cell(key, cons)
        self.measure(c)
        if self.anchor and c.n == 0 and not c.failures:
            return None  # never observed: not a failure mode of this student
        self.capacity(c)
        if c.cap < floor_rows:
            return None
        s = self.struct[key]
        c.p = (c.succ + 10 * s.p) / (c.n + 10)  # small cells shrink toward the structure's rate
        c.score = severity_score(c.p) if self.anchor else 1.0
        c.weight = c.freq * c.score
        c.example = s.example
        c.sub_label = _sub_label(s.example, cons)
        return c

    def candidate_domains(self, split_zero: bool) -> list[DomainPlan]:
        floor_rows = math.ceil(self.floor_share * self.total)
        out = []
        for k, s in self.struct.items():
            if split_zero:  # fallback: one domain per (structure, carry class), split by zero digits
                groups = [[{"cls": c, "zero": z} for z in (True, False)] for c in (0, 1, 2)]
            else:
                groups = [[{"cls": c} for c in (0, 1, 2)]]
            for group in groups:
                cells = [c for c in (self.make_cell(k, cons, floor_rows) for cons in group) if c is not None]
                if len(cells) < 2:
                    continue
                cells.sort(key=lambda c: -c.weight)
                label = _structure_label(s.example)
                if split_zero:
                    label = f"Expressions {k.split('|')[0]} {['no-carry', 'one-carry', 'multi-carry'][group[0]['cls']]}"
                n = sum(c.n for c in cells)
                p = sum(c.succ for c in cells) / n if n else s.p
                out.append(DomainPlan(k, label, cells, sum(c.weight for c in cells), p, n))
        if not split_zero and self.anchor and self.stones:
            drilled = {d.key for d in out}
            out += self.stone_domains(floor_rows, drilled)
        return out

    def stone_domains(self, floor_rows: int, drilled: set[str]) -> list[DomainPlan]:
        """Stepping-stone domains: easier variants of the hopeless structures that cannot be drilled
        (too few fresh instances for a domain of their own), which the real TRAIN split lacks."""
        hopeless = [s for s in self.struct.values() if s.p < HOPELESS_P and s.n >= 32 and s.key not in drilled]
        stones: dict[str, dict] = {}
        for h in hopeless:
            obs = self.template_obs(h.key)
            for template, ranges in stone_variants(obs[0].node, _ranges(obs)):
                key = f"{shape_of(template)}|{signs_of(template)}"
                if key in self.train_obs or key in self.struct:
                    continue  # the real split already holds it: GRPO on real data sees it too
                st = stones.setdefault(key, {"template": template, "ranges": ranges, "for": []})
                st["for"].append(h)
        out = []
        for key, st in stones.items():
            cells = []
            # Carrying stones first: a no-carry stone has ~1 structural feature, so it only joins (as the
            # easiest rung) when a carry class lacks fresh instances.
            for cls in (1, 2, 0):
                if len(cells) >= 2:
                    break
                cap = int(stone_space(st["template"], st["ranges"], {"cls": cls}, self.excluded, self.frame) / POOL_MARGIN)
                if cap < floor_rows:
                    continue
                freq = sum(h.freq for h in st["for"])
                c = Cell(key, {"cls": cls}, p=0.0, freq=freq, score=STONE_VALUE, weight=freq * STONE_VALUE,
                         example=st["template"], free_cap=cap, cap=cap, mode="free",
                         stone_for=[h.key for h in st["for"]], template=render(st["template"]), ranges=st["ranges"])
                # its anchors: failed prompts of the hard structures, or of the stone itself (an iteration after
                # the first reads the previous iteration's rollouts, which trained on stones)
                c.failures = [o for o in self.failures if o.key in c.stone_for or o.key == key]
                c.sub_label = _sub_label(st["template"], {"cls": cls})
                cells.append(c)
            if len(cells) < 2:
                continue
            label = f"Stepping-stone {_structure_label(st['template'])}"
            if len(label.split()) > 4:
                label = f"Stepping-stone {shape_of(st['template'])}"
            out.append(DomainPlan(key, label, cells, sum(c.weight for c in cells), 0.0, 0))
        return out

    def choose_domains(self) -> None:
        domains = self.candidate_domains(split_zero=False)
        self.fallback = sum(1 for d in domains if d.score > 0) < 3
        if self.fallback:
            domains = self.candidate_domains(split_zero=True)
            self.notes.append("fewer than three structures with learnable failures: each (structure, carry class) "
                              "became a domain, split by zero digits")
        domains.sort(key=lambda d: (-d.score, d.label))
        self.all_domains = domains
        if len(domains) < 3:
            raise PlanError(f"arith_teacher: only {len(domains)} structure(s) have two carry profiles with enough fresh "
                            f"instances (>= {math.ceil(self.floor_share * self.total)} rows each); the report needs 3 "
                            f"domains. Write iter_{self.n_iter}/ by hand or use another teacher.")
        top = domains[0].score or 1.0
        for d in domains:
            keep = [c for c in d.cells if c.weight >= 0.1 * (d.cells[0].weight or 1.0)]
            d.cells = (keep if len(keep) >= 2 else d.cells[:2])[:5]
            ratio = d.score / top
            d.severity = "high" if ratio >= 0.6 else "med" if ratio >= 0.3 else "low"
        chosen = [d for d in domains if d.score >= 0.25 * top][:5]
        chosen += [d for d in domains if d not in chosen][: max(0, 3 - len(chosen))]
        for d in domains:  # fresh instances run out over iterations: add the next structures until they suffice
            if sum(c.cap for e in chosen for c in e.cells) >= 1.25 * self.total or len(chosen) >= 6:
                break
            if d not in chosen:
                chosen.append(d)
                self.notes.append(f"added '{d.label}' because the more severe structures have few fresh instances left")
        for d in [d for d in domains if d not in chosen][: max(0, min(self.widen, 6 - len(chosen)))]:
            chosen.append(d)  # a retry after a failed self-check: more structures give the bars more room
            self.notes.append(f"added '{d.label}' to give the difficulty/feature bars more structures to draw on")
        chosen.sort(key=lambda d: -d.score)
        seen = Counter(d.label.lower() for d in chosen)
        for d in chosen:  # two structures can share a label (e.g. different digit lengths)
            if seen[d.label.lower()] > 1:
                d.label = " ".join(d.label.split()[:3] + [d.key.split("|")[0]])
        self.domains = chosen
        self.cells = [c for d in chosen for c in d.cells]

    # 4. rows per bucket -------------------------------------------------

    def allocate(self) -> None:
        caps = {id(c): c.cap for c in self.cells}
        if sum(caps.values()) < self.total:
            self.total = max(500, sum(caps.values()))
            self.notes.append(f"fresh instances are scarce: {self.total} rows instead of {self.teacher.total_rows}")
        self.floor_rows = math.ceil(self.floor_share * self.total)
        weights = {id(c): max(c.weight, 1e-9) ** self.exponent for c in self.cells}
        if self.anchor:  # success rates come from the anchor's rollouts only
            weights = rescue_weights(self.cells, weights)
        alloc = _round_alloc(weights, self.total, self.floor_rows, caps)
        for c in self.cells:
            c.rows = alloc[id(c)]
        self.anchors = {id(c): self.anchors_of(c) for c in self.cells}

    def anchors_of(self, c: Cell) -> list[dict]:
        """Failed prompts of this cell (newest first) whose skeleton the bucket paraphrases.

        A stepping stone paraphrases the hopeless prompts it leads to: the same operator skeleton with a
        shorter operand or one term fewer, so their carries cannot be copied (vec None)."""
        out, seen = [], set()
        for o in sorted(c.failures, key=lambda o: (o.step is None, -(o.step or 0), o.idx or 0)):
            if o.step is None or o.idx is None or o.question in seen:
                continue
            seen.add(o.question)
            out.append({"tag": f"skeleton:train_step_{int(o.step)}_idx_{int(o.idx)}",
                        "vec": None if c.stone_for else list(o.vec), "question": o.question})
        return out[:12]

    def gen_plan(self, trim: bool, skeleton: dict | None = None) -> dict:
        """The generator's PLAN (what gen_dataset.py embeds)."""
        buckets = []
        for d in self.domains:
            for c in d.cells:
                anchors = self.anchors[id(c)]
                c.mode = "pool" if len(c.pool) >= POOL_MARGIN * c.rows or c.free_cap < c.rows else "free"
                pool = list(c.pool) if c.mode == "pool" else []
                if trim and pool:  # embed enough candidates, those with the anchors' exact carries first
                    random.Random(f"pool:{self.seed}:{c.key}:{sorted(c.cons.items())}").shuffle(pool)
                    want = {tuple(a["vec"]) for a in anchors}
                    pool.sort(key=lambda e: carry_vector(parse_expr(e)) not in want)
                    pool = sorted(pool[: 3 * c.rows + 30])
                tmpl = None if c.stone_for else self.template_obs(c.key)
                buckets.append({
                    "domain": d.label, "sub_domain": c.sub_label, "rows": c.rows,
                    "template": c.template or tmpl[0].expr, "shape": c.key.split("|")[0], "signs": c.key.split("|")[1],
                    "cls": c.cons.get("cls"), "zero": c.cons.get("zero"), "mode": c.mode,
                    "ranges": c.ranges or _ranges(tmpl),
                    "student_bonus": int(bool(self.anchor) and c.p < HARD_FOR_STUDENT),
                    "anchors": anchors, "skeleton_share": (skeleton or {}).get(id(c), 0.6), "pool": pool,
                })
        return {"iteration": self.n_iter, "answer_tag": self.tag, "frame": self.frame, "features": [],
                "avoid": self.avoid, "buckets": buckets}

    # 5. pilot rows, features, rebalancing --------------------------------

    def pilot_and_rebalance(self) -> None:
        pilot = self.gen_plan(trim=False)
        pilot["features"] = [[f, f] for f in FEATURE_CATALOGUE]
        by_bucket: dict = defaultdict(list)
        for r in build_rows(pilot, self.seed, self.prior):
            by_bucket[(r["info"]["domain"], r["info"]["sub_domain"])].append(r)
        self.shares = []
        for d in self.domains:
            for c in d.cells:
                rs = by_bucket[(d.label, c.sub_label)]
                m = len(rs) or 1
                self.shares.append({
                    "hard": sum(r["info"]["difficulty"] == "hard" for r in rs) / m,
                    "easy": sum(r["info"]["difficulty"] == "easy" for r in rs) / m,
                    "skeleton": sum(r["info"]["source"].startswith("skeleton:") for r in rs) / m,
                    "flags": Counter(frozenset(r["info"]["structural_features"]) for r in rs),
                })
        self.lift = _feature_lift(self.source)
        self.features = _choose_features(self.cells, self.shares, self.lift, self.bars)
        moved = _rebalance(self.cells, self.shares, self.features, self.bars, self.floor_rows)
        if moved:
            why = ", ".join(f"{n} rows for '{bar}'" for bar, n in moved.most_common())
            self.notes.append(f"moved {sum(moved.values())} rows from more to less severe buckets to meet the procedure's bars ({why})")
        self.skeleton = {id(c): 0.6 for c in self.cells}
        if _metrics(self.cells, self.shares, self.features)["skeleton"] < self.bars["skeleton"]:
            for c, s in zip(self.cells, self.shares):
                self.skeleton[id(c)] = 1.0 if s["skeleton"] > 0 else 0.6

    def finish(self) -> Plan:
        gp = self.gen_plan(trim=True, skeleton=self.skeleton)
        gp["features"] = [[f, FEATURE_CATALOGUE[f][0]] for f in self.features]
        rows = build_rows(gp, self.seed, self.prior)
        for d in self.domains:
            d.evidence = _evidence(d, self.tag)
        stats = {
            "anchor_src": self.anchor_src, "anchor_steps": self.anchor_steps, "anchor_rollouts": len(self.anchor),
            "failures": len(self.failures), "failure_obs": self.failures, "failures_skipped": self.fail_skipped,
            "train_src": self.train_src, "train_questions": len(self.train_qs), "structures": self.struct,
            "all_domains": self.all_domains, "exponent": self.exponent, "lift": self.lift, "fallback": self.fallback,
            "eval_size": self.eval_size, "prior_questions": len(self.prior), "bars": self.bars,
            "stones": [d.label for d in self.domains if d.cells[0].stone_for],
        }
        if self.n_iter > 1 and self.anchor_src == "iter_0":
            stats["prev_rollouts"] = read_rollouts(self.run_dir / f"iter_{self.n_iter - 1}")[0]
        return Plan(self.n_iter, self.offset, self.domains, self.features, sum(c.rows for c in self.cells),
                    self.frame, self.tag, gp, rows, self.notes, stats)
