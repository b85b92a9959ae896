#!/usr/bin/env python3
"""A test double of prime-rl's `rl` command, in both dialects. Standard library only (seed tree).

    fake_rl.py @ a.toml @ b.toml --model.name M --max-steps 4 --orchestrator.batch-size 32 \
        --orchestrator.rollouts-per-example 4 --output-dir OUT [--ckpt.resume-step N]

Honours the `rl` contract the orchestrator relies on: `@` files deep-merged left to
right, dotted kebab-case overrides on top, [trainer] and [orchestrator] required,
a fresh run refused (FileExistsError) when OUT holds checkpoints, resume refused when
one of the resume trees is missing. Writes the seed's layout (prime-rl 09e297743):

    OUT/weights/step_N/{model.safetensors,config.json,tokenizer.json}
    OUT/checkpoints/step_N/trainer/{__0_0.distcp,.metadata}
    OUT/run_default/checkpoints/step_N/orchestrator/progress.pt
    OUT/run_default/broadcasts/step_N/{model.safetensors,STABLE}
    OUT/run_default/rollouts/step_N/{train,eval}_rollouts.jsonl   (prime-rl record fields)

with checkpoints at multiples of [ckpt] interval and at max_steps, evals at step 0, at multiples of
[orchestrator.eval] interval and at max_steps (after the last step). For a prime-rl >= 0.8 argv
(--run.name) it keeps main's (559b44772) rules, as the CPU engine does (rl/train.py): no weights/,
OUT/checkpoints/step_N/{trainer,orchestrator/progress.pt}, OUT/broadcasts/step_N from step_0 (the
start-up broadcast) with main's cleaning, OUT/rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl
holding verifiers v1 Episode records (this path imports verifiers), 1-indexed steps (base eval at
step_1), the eval of step S+1 written right after batch S (so the eval of max_steps comes BEFORE the
last step and the final checkpoint, and records the policy it scored, v{S-1}); --ckpt.resume-step
refused as main refuses it; [resume] step or dir (a fork, refused when the checkpoint's train sources
differ unless [orchestrator.ckpt] skip_progress). Its progress.pt is JSON (a double: the tool only
checks that it exists). Behaviour switches (env vars):

    FAKE_RL_STEP_S=0.005      seconds per training step
    FAKE_RL_DIE_AT_ONCE=1     print a traceback and exit 1 before doing anything
    FAKE_RL_CRASH_AFTER=N     exit 1 after finishing step N
    FAKE_RL_HANG=1            hang forever before the final eval (main: before the eval of max_steps)
    FAKE_RL_EVAL_DELAY=S      sleep S seconds before the final eval ("finish late")
    FAKE_RL_EXIT_DELAY=S      sleep S seconds after the final eval, before exiting
    FAKE_RL_TORN=1            final eval file ends with a torn (half-written) line
    FAKE_RL_EVAL_ROWS=N       write N final eval rows instead of num_examples
    FAKE_RL_NO_REWARD=1       final eval rows have no reward field
    FAKE_RL_NO_SIGNAL=1       every train and eval reward is 0.0 (a student that can do nothing)
    FAKE_RL_CANARY=STR        put STR into every eval row's prompt/completion/answer/info
    FAKE_RL_CKPT_EVERY=N      checkpoint every N steps whatever the config says
    FAKE_RL_ACC=0.4           eval accuracy (seeded, deterministic)
    FAKE_RL_LAUNCH_LOG=PATH   append "<pid> <argv>" per launch
    FAKE_RL_END_STAMP=PATH    write time.time() as the very last action before exiting (0 or 1)
    FAKE_RL_EVAL_BUDGET=N     write OUT/completion_budget.json as the CPU engine does, with N eval
                              completion tokens in force (the config's value as requested), and
                              FAKE_RL_ANSWERS_OVER=K eval answers longer than that budget
    FAKE_RL_TRAIN_DATA_LOG=PATH  append one JSON line per train env: the sha256 of the dataset.jsonl
                              the installed package of that id holds (what a real engine would train on)
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import tomllib
from pathlib import Path


def deep_merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = deep_merge(out[k], v) if isinstance(out.get(k), dict) and isinstance(v, dict) else v
    return out


def parse_argv(argv: list[str]) -> dict:
    cfg: dict = {}
    over: dict = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "@":
            cfg = deep_merge(cfg, tomllib.loads(Path(argv[i + 1]).read_text()))
            i += 2
            continue
        if not tok.startswith("--"):
            die(f"Config file error: unrecognized argument {tok!r}")
        key = tok[2:].replace("-", "_")
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            raw, i = argv[i + 1], i + 2
            try:
                val = json.loads(raw)
            except json.JSONDecodeError:
                val = raw
        else:
            val, i = True, i + 1
        node = over
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = val
    return deep_merge(cfg, over)


def die(msg: str, rc: int = 1) -> None:
    print(msg, flush=True)
    if stamp := os.environ.get("FAKE_RL_END_STAMP"):
        Path(stamp).write_text(repr(time.time()))
    sys.exit(rc)


def env_f(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def write_jsonl(path: Path, rows: list[dict], torn: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
            f.flush()
        if torn:
            f.write(json.dumps(rows[-1])[: 25])  # a writer killed mid-line


def touch(path: Path, text: str = "x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def row(example_id: int, reward: float, *, train: bool, canary: str, step: int) -> dict:
    mark = f" {canary}" if canary else ""
    r = {
        "example_id": example_id,
        "prompt": [{"role": "user", "content": f"What is {example_id} + {step}?{mark}"}],
        "completion": [{"role": "assistant", "content": f"<answer>{example_id + step}</answer>{mark}"}],
        "answer": f"{example_id + step}{mark}",
        "info": {"note": f"fake{mark}"},
        "reward": reward,
        "metrics": {"is_correct": reward},
        "timing": {"generation_ms": 1.0, "scoring_ms": 0.1},
        "is_completed": True,
        "is_truncated": False,
        "stop_condition": "stop",
        "error": None,
        "token_usage": {"prompt": 12, "completion": 5},
        "sampling_args": {"temperature": 1.0, "max_tokens": 64},
    }
    if train:
        r.update(env_name="train", advantage=0.0, is_filtered=False)
    return r


def as_episode(r: dict, kind: str, step: int, policy: int | None = None) -> dict:
    """A seed-shaped fake row as prime-rl main writes an episode: verifiers v1 `Episode.to_record()`
    (built with verifiers' own classes, so the readers see the real record shape)."""
    import verifiers.v1 as vf
    from verifiers.v1.episode import EnvInfo, GroupInfo, TrainRunInfo, TrainWorkInfo, EvalWorkInfo
    from verifiers.v1.task import WireTaskData
    from verifiers.v1.trace import ModelCall
    from verifiers.v1.types import AssistantMessage, UserMessage, Usage

    task = vf.TraceTask(type="ArithTask", data=WireTaskData(idx=r["example_id"], prompt=r["prompt"][0]["content"],
                                                            answer=r["answer"], info=r["info"]))
    trace = vf.Trace(task=task, agent=vf.AgentInfo(config=vf.AgentConfig()), ok=True, is_completed=True,
                     metrics=dict(r["metrics"]), info={"advantage": r["advantage"]} if "advantage" in r else {})
    trace.nodes = [vf.MessageNode(message=UserMessage(content=r["prompt"][0]["content"]), token_ids=[1] * 12,
                                  mask=[False] * 12),
                   vf.MessageNode(parent=0, message=AssistantMessage(content=r["completion"][0]["content"]),
                                  sampled=True, token_ids=[2] * 5, mask=[True] * 5)]
    trace.calls = [ModelCall(node=1, finish_reason="stop", usage=Usage(prompt_tokens=12, completion_tokens=5))]
    if "reward" in r:
        trace.rewards = {"correct_answer": vf.Reward(score=r["reward"])}
    span = vf.PolicySpan(start=policy, end=policy) if policy is not None else None
    work = (TrainWorkInfo if kind == "train" else EvalWorkInfo)(step=step, policy=span)
    return vf.Episode(env=EnvInfo(id="selfimprove_arith_v1", name=kind), task=task,
                      group=GroupInfo(id=f"{kind}-{step}-{r['example_id']}"),
                      run=TrainRunInfo(id="fake", work=work), ok=True, traces=[trace]).to_record()


def log_train_data(log: Path, out: Path, envs: list[dict]) -> None:
    """Which rows each train env would load: its installed package's dataset.jsonl, by sha256."""
    import hashlib
    import importlib.util

    with open(log, "a") as f:
        for env in envs:
            spec = importlib.util.find_spec(str(env.get("id", "")).replace("-", "_"))
            data = Path(spec.origin).parent / "dataset.jsonl" if spec and spec.origin else None
            sha = hashlib.sha256(data.read_bytes()).hexdigest() if data and data.is_file() else None
            f.write(json.dumps({"output_dir": str(out), "env": env.get("id"), "dataset_sha256": sha}) + "\n")


def main() -> None:
    argv = sys.argv[1:]
    if log := os.environ.get("FAKE_RL_LAUNCH_LOG"):
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {' '.join(argv)}\n")
    if os.environ.get("FAKE_RL_DIE_AT_ONCE"):
        die("Traceback (most recent call last):\n  File \"rl.py\", line 1, in <module>\n"
            "RuntimeError: fake engine died at once (CUDA not available)")
    cfg = parse_argv(argv)
    # prime-rl >= 0.8 (main 559b44772): the run dir is output_dir/run.name and main's tree has no
    # run_default/; the config is read through the CPU engine's view of that dialect.
    main_layout = "run" in cfg or "group_size" in cfg.get("orchestrator", {})
    extras: dict = {}
    if main_layout:
        from selfimprove.errors import ConfigError
        from selfimprove.rl.config import engine_view, main_extras
        from selfimprove.stack.dialects import V1

        if cfg.get("ckpt", {}).get("resume_step") is not None:  # main has no ckpt.resume_step (pydantic's words)
            die("1 validation error for RLConfig\nckpt.resume_step\n  Extra inputs are not permitted; did you mean --resume?")
        if (name := cfg.get("run", {}).get("name")) and cfg.get("output_dir"):
            cfg["output_dir"] = str(Path(cfg["output_dir"]) / name)
        try:
            extras = main_extras(cfg)
        except ConfigError as e:
            die(str(e))
        cfg = engine_view(cfg, V1)
    for section in ("trainer", "orchestrator"):
        if not isinstance(cfg.get(section), dict):
            die(f"Config file error: missing [{section}]")
    out = Path(cfg["output_dir"])
    max_steps = int(cfg.get("max_steps", 100))
    orch = cfg["orchestrator"]
    rpe = int(orch.get("rollouts_per_example", 1))
    batch = int(orch.get("batch_size", 8))
    ckpt = cfg.get("ckpt", {})
    saves = isinstance(cfg.get("ckpt"), dict) or bool(os.environ.get("FAKE_RL_CKPT_EVERY"))  # a bare [ckpt] saves too
    interval = int(os.environ.get("FAKE_RL_CKPT_EVERY") or ckpt.get("interval") or 0)
    resume = ckpt.get("resume_step")
    ev = orch.get("eval", {})
    eval_interval = int(ev.get("interval", max_steps))
    n_eval = sum(int(e.get("num_examples", 10)) * int(e.get("rollouts_per_example", 1)) for e in ev.get("env", [])) or 10
    sources = sorted(str(e.get("name") or e.get("id")) for e in orch.get("train", {}).get("env", []))
    canary = os.environ.get("FAKE_RL_CANARY", "")
    acc = env_f("FAKE_RL_ACC", 0.4)
    step_s = env_f("FAKE_RL_STEP_S", 0.005)
    crash_after = int(os.environ.get("FAKE_RL_CRASH_AFTER", "0"))
    rd = out if main_layout else out / "run_default"

    def orch_ckpt(step: int, root: Path | None = None) -> Path:
        if root is not None:
            return root / "orchestrator"
        return (out / "checkpoints" if main_layout else rd / "checkpoints") / f"step_{step}" / "orchestrator"

    def episodes(step: int, kind: str) -> Path:
        if main_layout:
            return rd / "rollouts" / f"step_{step}" / kind / "all" / "traces.jsonl"
        return rd / "rollouts" / f"step_{step}" / f"{kind}_rollouts.jsonl"

    def write_rows(step: int, kind: str, rows: list[dict], torn: bool = False, policy: int | None = None) -> None:
        """Seed records, or (main's tree) Episode records in all/ and, as main does, the effective subset."""
        if main_layout:
            rows = [as_episode(r, kind, step, policy) for r in rows]
            write_jsonl(episodes(step, kind).parent.parent / "effective" / "traces.jsonl", rows)
        write_jsonl(episodes(step, kind), rows, torn=torn)

    fork = extras.get("resume_dir")
    if fork is not None:  # main's resume.dir: another run's checkpoints/step_N (or this run's own)
        start = int(fork.name.removeprefix("step_"))
        for need in (fork / "trainer", orch_ckpt(start, fork) / "progress.pt"):
            if not need.exists():
                die(f"FileNotFoundError: Orchestrator checkpoint not found at {need}")
        saved = json.loads((orch_ckpt(start, fork) / "progress.pt").read_text()).get("sources", [])
        if not extras.get("skip_progress") and saved != sources:
            die(f"ValueError: Train-source checkpoint envs {saved} do not match configured envs {sources}")
    elif resume is not None:
        resume = int(resume)
        if resume == -1:  # a bare resume: the latest checkpoint
            done = sorted(int(d.name[5:]) for d in (out / "checkpoints").glob("step_*") if (d / "trainer").is_dir())
            resume = done[-1] if done else die(f"FileNotFoundError: no checkpoint in {out / 'checkpoints'}")
        need = [out / "checkpoints" / f"step_{resume}" / "trainer", orch_ckpt(resume) / "progress.pt"]
        if not main_layout:  # the seed also needs the step's broadcast; main re-broadcasts at start-up
            need.append(rd / "broadcasts" / f"step_{resume}" / "STABLE")
        for p in need:
            if not p.exists():
                die(f"FileNotFoundError: {p}")
        start = resume
    else:
        if (out / "checkpoints").is_dir() and any((out / "checkpoints").iterdir()):
            die(f"FileExistsError: {out / 'checkpoints'} holds checkpoints; set clean_output_dir = true")
        start = 0
    print(f"fake rl: model={cfg.get('model', {}).get('name')} steps {start}->{max_steps} batch={batch} rpe={rpe}", flush=True)
    if budget := os.environ.get("FAKE_RL_EVAL_BUDGET"):
        out.mkdir(parents=True, exist_ok=True)
        asked = ev.get("sampling", {}).get("max_completion_tokens")
        (out / "completion_budget.json").write_text(json.dumps({
            "positions": 256, "train": {"requested": None, "in_force": 128, "longest_prompt": 128},
            "eval": {"requested": asked, "in_force": int(budget), "longest_prompt": 256 - int(budget)},
            "answers_longer_than_budget": {"train": 0, "eval": int(os.environ.get("FAKE_RL_ANSWERS_OVER", "0"))}}))
    if data_log := os.environ.get("FAKE_RL_TRAIN_DATA_LOG"):
        log_train_data(Path(data_log), out, orch.get("train", {}).get("env", []))

    def eval_rows(step: int, n: int) -> list[dict]:
        rng = random.Random(1000 + step)
        nr = os.environ.get("FAKE_RL_NO_REWARD") and step == max_steps
        rows = [row(i, 1.0 if rng.random() < acc else 0.0, train=False, canary=canary, step=step) for i in range(n)]
        if nr:
            for r in rows:
                r.pop("reward")
        return rows

    def final_eval(policy: int) -> None:
        """The eval of max_steps, with the switches that bend it."""
        if os.environ.get("FAKE_RL_HANG"):
            print("fake rl: hanging before the final eval", flush=True)
            while True:
                time.sleep(3600)
        time.sleep(env_f("FAKE_RL_EVAL_DELAY", 0))
        n_final = int(os.environ.get("FAKE_RL_EVAL_ROWS") or n_eval)
        write_rows(max_steps, "eval", eval_rows(max_steps, n_final), torn=bool(os.environ.get("FAKE_RL_TORN")),
                   policy=policy)

    def broadcast(step: int) -> None:
        touch(rd / "broadcasts" / f"step_{step}" / "model.safetensors")
        touch(rd / "broadcasts" / f"step_{step}" / "STABLE", "")
        if main_layout:  # main's maybe_clean: step-2 goes unless it falls on the checkpoint interval
            old = max(step - 2, 0)
            if old != step and not (interval and old % interval == 0):
                import shutil
                shutil.rmtree(rd / "broadcasts" / f"step_{old}", ignore_errors=True)

    if main_layout:
        broadcast(start)  # the trainer's start-up broadcast of the incoming policy (v0 or v{resume})
        if start == 0 and ev.get("eval_base_model", True):
            write_rows(1, "eval", eval_rows(1, n_eval), policy=0)  # 1-indexed: the base eval is step 1
    elif start == 0 and ev.get("eval_base_model", True):
        write_rows(0, "eval", eval_rows(0, n_eval))
    for step in range(start + 1, max_steps + 1):
        time.sleep(step_s)
        rng = random.Random(step)
        p = 0.0 if os.environ.get("FAKE_RL_NO_SIGNAL") else min(0.95, acc + 0.3 * step / max_steps)
        train = [row(i // rpe, 1.0 if rng.random() < p else 0.0, train=True, canary="", step=step)
                 for i in range(min(batch, 64))]
        write_rows(step, "train", train)
        if main_layout and (step + 1) % eval_interval == 0:  # triggered right after batch `step` ships
            if step + 1 == max_steps:
                final_eval(policy=step - 1)
            else:
                write_rows(step + 1, "eval", eval_rows(step + 1, n_eval), policy=step - 1)
        broadcast(step)
        if saves and ((interval and step % interval == 0) or step == max_steps):  # prime-rl also saves the final step
            touch(out / "checkpoints" / f"step_{step}" / "trainer" / "__0_0.distcp")
            touch(out / "checkpoints" / f"step_{step}" / "trainer" / ".metadata")
            touch(orch_ckpt(step) / "progress.pt", json.dumps({"step": step, "sources": sources}))
            if not main_layout:  # the seed's HF weights; main writes none
                for name in ("model.safetensors", "config.json", "tokenizer.json"):
                    touch(out / "weights" / f"step_{step}" / name, "{}")
        mean = sum(r["reward"] for r in train) / len(train)
        print(f"Step {step} | reward {mean:.3f}", flush=True)
        if crash_after and step >= crash_after:
            die(f"Traceback (most recent call last):\nRuntimeError: fake engine crashed after step {step}")
        if not main_layout and step % eval_interval == 0 and step != max_steps:
            write_rows(step, "eval", eval_rows(step, n_eval))

    if not main_layout:
        final_eval(policy=max_steps)
    time.sleep(env_f("FAKE_RL_EXIT_DELAY", 0))
    print("RL training finished!", flush=True)
    if stamp := os.environ.get("FAKE_RL_END_STAMP"):
        Path(stamp).write_text(repr(time.time()))

if __name__ == "__main__":
    main()
