"""The training run, top to bottom: set up, (eval at step 0), then per step
sample -> score -> GRPO update -> write rollouts and broadcast -> maybe eval ->
maybe checkpoint. One process plays prime-rl's trainer and orchestrator.

Determinism: prompts of step n come from per-env cursors over seeded
permutations of the train split (the cursor is checkpointed); the sampling
generator of step n is seeded from (seed, n). So a run resumed from step N
repeats steps N+1.. of an uninterrupted run bit for bit (same threads, same
machine), and evals never disturb the training stream.
"""

from __future__ import annotations

import copy
import json
import os
import random
import time

import tomli_w
import torch

from ..errors import ConfigError
from ..rundir import atomic_write_text
from ..stack.toml_paths import CONFIG_ERROR
from ..student_limits import BUDGET_FILE, chat_prompt_lengths
from .checkpoint import (Layout, check_output_dir, fork_step, load_orchestrator, load_trainer, prune,
                         prune_broadcasts, save_broadcast, save_orchestrator, save_trainer, save_weights, write_jsonl)
from .episodes import episode_rows, write_episodes
from .config import EngineConfig, ignored_keys, resolved_tomls
from .grpo import grpo_step
from .logs import Log
from .rollouts import (EnvSpec, check_encodable, load_env, run_rollouts, sampling_chunk, sampling_line, split_rows,
                       strip_private)
from .tasksets import load_taskset, taskset_rows
from .student import load_student, resolve_model


class Cursor:
    """Walks a train split in seeded random order, epoch after epoch (no replacement within an epoch)."""

    def __init__(self, n_rows: int, seed: str, epoch: int = 0, pos: int = 0):
        self.n, self.seed, self.epoch, self.pos = n_rows, seed, epoch, pos
        self._perm_epoch, self._perm = None, []

    def next(self) -> int:
        if self.pos >= self.n:
            self.epoch, self.pos = self.epoch + 1, 0
        if self._perm_epoch != self.epoch:
            self._perm = list(range(self.n))
            random.Random(f"{self.seed}:{self.epoch}").shuffle(self._perm)
            self._perm_epoch = self.epoch
        i = self._perm[self.pos]
        self.pos += 1
        return i

    def state(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos}


# A slow model's sampling logs a progress line at most this often (seconds).
SAMPLING_LOG_S = 20.0
# The first sampling line comes sooner: with the model's load it is the first sign of life a slow student
# gives (SmolLM2-135M on 2 cores: ready ~45 s after launch, so progress shows within the first minute).
FIRST_SAMPLING_LOG_S = 5.0


def source_cursors(seed: int, train: list[EnvSpec]) -> dict[str, Cursor]:
    """One Cursor per train source (keyed by name, as checkpoints store them), seeded by the run seed and the
    source's POSITION, not its name: a generated package's name carries a per-run token, and seeding by it
    made two runs of the same data from the same checkpoint walk their rows in different orders."""
    return {s.name: Cursor(len(s.rows), f"{seed}:source{i}") for i, s in enumerate(train)}


def _load_specs(blocks, split: str, cache: dict, tok, n_eval_default: int = -1, tasksets: bool = False) -> list[EnvSpec]:
    """Load each env block: a classic env (seed dialect) picks its own train/eval split; a v1 source
    (prime-rl >= 0.8, `tasksets`) is a Taskset whose config already picks its rows."""
    specs = []
    for b in blocks:
        key = (b.id, repr(sorted(b.args.items())))
        if key not in cache:
            cache[key] = load_taskset(b.id, b.args) if tasksets else load_env(b.id, b.args)
        env = cache[key]
        n = (b.num_examples if b.num_examples is not None else n_eval_default) if split == "eval" else -1
        rows = taskset_rows(env, n) if tasksets else split_rows(env, split, n)
        specs.append(EnvSpec(id=b.id, name=b.name, args=b.args, ratio=b.ratio, env=env, rows=rows,
                             num_examples=b.num_examples, rollouts_per_example=b.rollouts_per_example))
        check_encodable(tok, specs[-1], split)
    return specs


def longest_prompt(tok, specs: list[EnvSpec]) -> tuple[int, str]:
    """(tokens of the longest rendered prompt over EVERY row of `specs`, its env's name). Every row, not a
    sample: the first 200 rows of a real split missed prompts of 171 and 214 tokens, so prompt +
    completion reached 260 positions on a 256-position student. Rendering is batched (one chat-template
    call and one fast-tokenizer call per env): about 4 s for 20k rows on one core."""
    best, where = 0, specs[0].name if specs else "?"
    for s in specs:
        if not s.rows:
            continue
        n = max(chat_prompt_lengths(tok, [r["prompt"] for r in s.rows]))  # the dataset gate counts the same way
        if n > best:
            best, where = n, s.name
    return best, where


def answers_over(tok, specs: list[EnvSpec], budget: int) -> tuple[int, int]:
    """(rows whose reference answer alone is longer than `budget` tokens, rows checked): such a row
    cannot be answered in full within the completion budget (a lower bound: reasoning adds more)."""
    answers = [str(r["answer"]) for s in specs for r in s.rows if str(r["answer"])]
    if not answers:
        return 0, 0
    return sum(len(ids) > budget for ids in tok(answers, add_special_tokens=False)["input_ids"]), len(answers)


def _max_tokens(cfg_tokens: int | None, seq_len: int | None, context: int | None, tok, specs: list[EnvSpec],
                key: str) -> tuple[int, int]:
    """(the completion budget, the longest prompt in tokens): the config's (None = no cap of its own),
    capped by the room the longest prompt of any row leaves in min(seq_len, the model's context).
    Capping by seq_len alone let a 256-position student sample 2048 tokens of noise per rollout (issue 15)."""
    limit = min(x for x in (seq_len, context) if x) if (seq_len or context) else None
    if limit is None or not specs:
        if cfg_tokens is None:
            raise ConfigError(f"{CONFIG_ERROR}: {key} is not set and neither seq_len nor the model's context "
                              "bounds it; set it")
        return cfg_tokens, 0
    longest, where = longest_prompt(tok, specs)
    if longest >= limit:
        raise ConfigError(f"{CONFIG_ERROR}: seq_len: the longest prompt of {where} is {longest} tokens and the "
                          f"model attends over {limit} positions (min of seq_len and its context): no room for "
                          f"{key}; use a model with a longer context or shorter prompts")
    return max(1, min(cfg_tokens or limit, limit - longest)), longest


def write_budget(lay: Layout, cfg: EngineConfig, *, context: int | None, train: tuple[int, int],
                 evals: tuple[int, int] | None, answers_too_long: dict) -> dict:
    """Record what the engine gives each split, beside what the config asked, so the CLI can say when
    the engine cut a budget (the config alone says e.g. 2048 where 43 are in force)."""
    limit = min(x for x in (cfg.seq_len, context) if x) if (cfg.seq_len or context) else None
    record = {
        "positions": limit, "seq_len": cfg.seq_len, "model_context": context,
        "train": {"requested": cfg.max_tokens, "in_force": train[0], "longest_prompt": train[1]},
        "eval": ({"requested": cfg.eval.max_tokens, "in_force": evals[0], "longest_prompt": evals[1]}
                 if evals is not None else None),
        "answers_longer_than_budget": answers_too_long,
    }
    atomic_write_text(lay.out / BUDGET_FILE, json.dumps(record, indent=2) + "\n")
    return record


def requeued_resume_step(lay: Layout, resume_step: int | None) -> int | None:
    """SLURM requeued this job (its node failed or it was preempted) and runs the same script again: continue
    from the last complete checkpoint the first run left (-1), instead of refusing the output dir it filled."""
    if resume_step is None and int(os.environ.get("SLURM_RESTART_COUNT") or 0) > 0 and lay.complete_steps():
        print(f"selfimprove-rl: SLURM requeued this job (restart {os.environ['SLURM_RESTART_COUNT']}); resuming "
              f"from checkpoint step {lay.complete_steps()[-1]}", flush=True)
        return -1
    return resume_step


def run(cfg: EngineConfig, raw: dict) -> None:
    lay = Layout(cfg.output_dir, cfg.layout)
    if cfg.resume_dir is not None:
        start = fork_step(lay, cfg.resume_dir, cfg.max_steps)
    else:
        start = check_output_dir(lay, requeued_resume_step(lay, cfg.resume_step), cfg.max_steps, cfg.clean_output_dir)
    lay.out.mkdir(parents=True, exist_ok=True)
    for name, table in resolved_tomls(raw).items():
        atomic_write_text(lay.configs / f"{name}.toml", tomli_w.dumps(table))
    tlog, olog = Log(lay.logs / "trainer.log"), Log(lay.logs / "orchestrator.log", echo=True)
    try:
        _run(cfg, raw, lay, start, tlog, olog)
    finally:
        tlog.close()
        olog.close()


def _run(cfg: EngineConfig, raw: dict, lay: Layout, start: int | None, tlog: Log, olog: Log) -> None:
    t_run = time.time()
    ignored = ignored_keys(raw)
    if ignored:
        olog.warning(f"The CPU engine ignores these keys (GPU-only or not honoured): {', '.join(ignored)}")
    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    model_dir = resolve_model(cfg.model_name, log=olog.info)
    model, tok = load_student(model_dir)
    n_params = sum(p.numel() for p in model.parameters())
    tlog.info(f"Loaded model {cfg.model_name} from {model_dir} ({n_params / 1e6:.2f}M parameters)")
    chunk = sampling_chunk(n_params)

    def sampling_log(what: str):
        """on_chunk / on_token for run_rollouts: a `Sampling <what>: done/total` line at most every SAMPLING_LOG_S,
        so a slow model shows life long before its first step ends, even inside a chunk of long completions
        (the watcher shows the line as its note)."""
        t0, last = time.time(), [time.time() - SAMPLING_LOG_S + FIRST_SAMPLING_LOG_S]

        def on_chunk(done: int, total: int) -> None:
            if done < total and time.time() - last[0] >= SAMPLING_LOG_S:
                last[0] = time.time()
                olog.info(sampling_line(what, done, total, time.time() - t0))
        return on_chunk

    env_cache: dict = {}
    train = _load_specs(cfg.train_envs, "train", env_cache, tok, tasksets=cfg.tasksets)
    evals = _load_specs(cfg.eval.envs, "eval", env_cache, tok, cfg.eval.num_examples, cfg.tasksets) if cfg.eval else []
    ratios = [s.ratio if s.ratio is not None else 1.0 for s in train]
    context = getattr(model.config, "max_position_embeddings", None)
    train_budget = _max_tokens(cfg.max_tokens, cfg.seq_len, context, tok, train,
                               "orchestrator.train.sampling.max_completion_tokens")
    eval_budget = _max_tokens(cfg.eval.max_tokens, cfg.seq_len, context, tok, evals,
                              "orchestrator.eval.sampling.max_completion_tokens") if cfg.eval else None
    train_tokens, eval_tokens = train_budget[0], (eval_budget[0] if eval_budget else 0)
    too_long = {}
    for split, specs, budget in (("train", train, train_tokens), ("eval", evals, eval_tokens)):
        over, checked = answers_over(tok, specs, budget) if specs else (0, 0)
        too_long[split] = over
        if over:
            olog.warning(f"{over} of {checked} {split} answers are longer than the {budget}-token completion "
                         "budget: those rows cannot be answered in full")
    write_budget(lay, cfg, context=context, train=train_budget, evals=eval_budget, answers_too_long=too_long)
    olog.info(f"Completion budget: {train_tokens} train / {eval_tokens} eval tokens (capped by seq_len "
              f"{cfg.seq_len} and the model's {context} positions, after the longest prompt of every row)")
    olog.info(f"Train envs: {', '.join(f'{s.name} ({len(s.rows)} rows, ratio {r:g})' for s, r in zip(train, ratios))}; "
              f"{cfg.prompts_per_step} prompts x {cfg.rollouts_per_example} rollouts per step")

    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)
    ref_model = copy.deepcopy(model).eval() if cfg.kl_coef > 0 else None
    cursors = source_cursors(cfg.seed, train)
    step = 0
    if start is not None:
        load_trainer(lay, start, model, opt, root=cfg.resume_dir)
        restore_sources(lay, cfg, start, cursors, olog)
        step = start
        olog.info(f"Resumed from step {start} ({cfg.resume_dir or lay.trainer(start)})")
    if lay.main:  # the trainer's start-up broadcast of the incoming policy: v0, or v{resume} (rl/train.py:270-277)
        save_broadcast(lay, step, model)

    def evaluate(n: int, policy: int) -> None:
        """Evaluate the model in hand (policy version `policy`) and label the rollouts step `n`."""
        t0 = time.time()
        metrics: dict = {}
        rows, episodes, effective = [], [], []
        for s in evals:
            rpe = s.rollouts_per_example or cfg.eval.rollouts_per_example
            gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + 7919 * n + 1)
            progress = sampling_log(f"the eval of step {n} ({s.name})")
            recs = run_rollouts(model, tok, [(s, r) for r in s.rows], n=rpe, temperature=cfg.eval.temperature,
                                max_tokens=eval_tokens, generator=gen, chunk=chunk, on_chunk=progress, on_token=progress)
            mean = sum(r["reward"] for r in recs) / max(1, len(recs))
            olog.info(f"Evaluated {s.name} at step {n} | Avg@{rpe}: {mean:.4f} | Examples: {len(s.rows)} | "
                      f"Policy: v{policy} | Time: {time.time() - t0:.2f}s")
            metrics |= {f"eval/{s.name}/reward/mean": mean, f"eval/{s.name}/policy_version": float(policy)}
            if lay.layout.traces:  # eval effective = the rollouts that did not error
                a, e = episode_rows(recs, "eval", n, rpe, [True] * len(recs), policy=policy)
                episodes, effective = episodes + a, effective + e
            else:
                rows += [strip_private(r) for r in recs]
        if lay.metrics_file is not None:  # main logs eval/<env>/policy_version per eval (orchestrator.py:919-935)
            _append_metrics(lay.metrics_file, n, metrics)
        if lay.layout.traces:
            write_episodes(lay.rollouts(n), "eval", episodes, effective)
        else:
            write_jsonl(lay.eval_file(n), rows)

    if cfg.eval and lay.main:
        # Main's first eval trigger fires at start-up, labelled progress.step = 1, on v0, unless skip_first_step;
        # a resumed run never re-runs it (orchestrator/eval_source.py:40-55).
        if start is None and cfg.eval.eval_base_model:
            evaluate(lay.layout.base_eval_step, policy=0)
    elif cfg.eval:
        if start is None and cfg.eval.eval_base_model:
            evaluate(0, policy=0)
        elif start is not None and not cfg.eval.skip_eval_on_resume and start % cfg.eval.interval == 0:
            evaluate(start, policy=start)

    while step < cfg.max_steps:
        step += 1
        t0 = time.time()
        pick = random.Random(f"{cfg.seed}:pick:{step}")
        chosen = []
        for _ in range(cfg.prompts_per_step):
            s = train[0] if len(train) == 1 else pick.choices(train, weights=ratios)[0]
            chosen.append((s, s.rows[cursors[s.name].next()]))
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
        progress = sampling_log(f"step {step}")
        records = run_rollouts(model, tok, chosen, n=cfg.rollouts_per_example, temperature=cfg.temperature,
                               max_tokens=train_tokens, generator=gen, chunk=chunk, on_chunk=progress, on_token=progress)
        t_gen = time.time() - t0
        if cfg.eval and lay.main and (step + 1) % cfg.eval.interval == 0:
            # Main triggers the eval of step S+1 right after batch S ships, before the trainer has trained on
            # it, so inference holds v{S-1} at best (orchestrator.py:690 and 759; no forced eval at max_steps):
            # the eval of max_steps scores v{max_steps-1}-at-best, never the final policy.
            evaluate(step + 1, policy=step - 1)
        stats = grpo_step(model, opt, records, cfg.rollouts_per_example, pad_id=tok.pad_token_id, max_norm=cfg.max_norm,
                          clip_eps=cfg.clip_eps, kl_coef=cfg.kl_coef, ref_model=ref_model)
        t_upd = time.time() - t0 - t_gen
        if lay.layout.traces:  # after the update: grpo_step marks what it trained on (the effective subset)
            write_episodes(lay.rollouts(step), "train", *episode_rows(
                records, "train", step, cfg.rollouts_per_example, [bool(r.get("_trained")) for r in records]))
        else:
            write_jsonl(lay.train_file(step), [strip_private(r) for r in records])
        save_broadcast(lay, step, model)
        prune_broadcasts(lay, step, cfg.ckpt_interval if cfg.ckpt else None)

        dt = time.time() - t0
        rewards = [r["reward"] for r in records]
        lens = [len(r["_ids"][1]) for r in records]
        errors = sum(1 for r in records if r["error"])
        tlog.info(f"Step {step} | Time: {dt:.2f}s | Loss: {stats['loss']:.4f} | Grad. Norm: {stats['grad_norm']:.4f} | "
                  f"LR: {cfg.lr:.2e} | Active rollouts: {stats['active']}/{len(records)} | Update: {t_upd:.2f}s")
        olog.info(f"Step {step} | Time: {dt:.2f}s | Reward: {sum(rewards) / len(rewards):.4f} | "
                  f"Zero-var groups: {stats['zero_var']:.1%} | Seq. Length: {sum(lens) / len(lens):.1f} tokens/sample | "
                  f"Truncated: {sum(r['is_truncated'] for r in records) / len(records):.1%} | "
                  f"Throughput: {len(records) / max(t_gen, 1e-9):.1f} rollouts/s"
                  + (f" | Reward errors: {errors}" if errors else ""))
        if lay.metrics_file is not None:  # main's monitors.file row: {"step", "time", **metrics}
            _append_metrics(lay.metrics_file, step, {"reward/mean": sum(rewards) / len(rewards), "loss": stats["loss"],
                                                     "grad_norm": stats["grad_norm"], "time/step": dt})

        if cfg.eval and not lay.main and (step % cfg.eval.interval == 0 or step == cfg.max_steps):
            evaluate(step, policy=step)
        if cfg.ckpt and ((cfg.ckpt_interval and step % cfg.ckpt_interval == 0) or step == cfg.max_steps):
            t1 = time.time()
            if lay.layout.hf_weights:
                save_weights(lay, step, model, tok)
            save_trainer(lay, step, model, opt)
            save_orchestrator(lay, step, {"cursors": {k: c.state() for k, c in cursors.items()}, "seed": cfg.seed},
                              {"python_rng": random.getstate(), "torch_rng": torch.get_rng_state()})
            if not lay.main:
                save_broadcast(lay, step, model)  # (re)written so its STABLE exists with the checkpoint
            prune(lay, cfg.keep_last, cfg.keep_interval, protect={step})
            tlog.info(f"Saved checkpoint at step {step} to {lay.trainer(step)} ({time.time() - t1:.2f}s)")
    tlog.info(f"RL trainer finished! ({time.time() - t_run:.1f}s)")
    olog.info(f"Orchestrator finished. ({time.time() - t_run:.1f}s)")


def restore_sources(lay: Layout, cfg: EngineConfig, start: int, cursors: dict, olog: Log) -> None:
    """Restore the train-source state (the per-source cursors) of checkpoint `start`.

    Main restores it unless [orchestrator.ckpt] skip_progress (orchestrator/ckpt.py:58-67), and refuses a
    checkpoint whose source names differ from the configured ones with its own words
    (orchestrator/train_source.py:73-82): forking iter_0 into an arm that trains on other sources needs
    skip_progress. The seed dialect restores the cursors of the names both share."""
    progress, _ = load_orchestrator(lay, start, root=cfg.resume_dir)
    saved = progress["cursors"]
    if lay.main and cfg.skip_progress:
        olog.info("Skipping progress and train source loading from checkpoint")
        return
    if lay.main and set(saved) != set(cursors):
        raise ConfigError(f"Train-source checkpoint envs {sorted(saved)} do not match configured envs "
                          f"{sorted(cursors)} (prime-rl main orchestrator/train_source.py:78-82; set "
                          "[orchestrator.ckpt] skip_progress = true to start the new sources afresh)")
    for name, c in saved.items():
        if name in cursors:
            cursors[name].epoch, cursors[name].pos = c["epoch"], c["pos"]


def _append_metrics(path, step: int, metrics: dict) -> None:
    """One line per step, appended as prime-rl main's FileMonitor does (a reader may tail it)."""
    import json

    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"step": step, "time": time.time(), **metrics}) + "\n")
