#!/usr/bin/env python3
"""A test double of prime-rl's `rl` command (seed dialect). Standard library only (seed tree).

    fake_rl.py @ a.toml @ b.toml --model.name M --max-steps 4 --orchestrator.batch-size 32 \
        --orchestrator.rollouts-per-example 4 --output-dir OUT [--ckpt.resume-step N]

Honours the `rl` contract the orchestrator relies on: `@` files deep-merged left to
right, dotted kebab-case overrides on top, [trainer] and [orchestrator] required,
a fresh run refused (FileExistsError) when OUT holds checkpoints, resume refused when
one of the three resume trees is missing. Writes the prime-rl layout:

    OUT/weights/step_N/{model.safetensors,config.json,tokenizer.json}
    OUT/checkpoints/step_N/trainer/{__0_0.distcp,.metadata}
    OUT/run_default/checkpoints/step_N/orchestrator/progress.json
    OUT/run_default/broadcasts/step_N/{model.safetensors,STABLE}
    OUT/run_default/rollouts/step_N/{train,eval}_rollouts.jsonl   (prime-rl record fields)
or, for a prime-rl >= 0.8 argv (--run.name), main's tree: OUT/checkpoints/step_N/{trainer,orchestrator},
OUT/broadcasts/step_N, OUT/rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl holding
verifiers v1 Episode records (this path imports verifiers).

Checkpoints at multiples of [ckpt] interval; evals at step 0 and at multiples of
[orchestrator.eval] interval and at max_steps. Behaviour switches (env vars):

    FAKE_RL_STEP_S=0.005      seconds per training step
    FAKE_RL_DIE_AT_ONCE=1     print a traceback and exit 1 before doing anything
    FAKE_RL_CRASH_AFTER=N     exit 1 after finishing step N
    FAKE_RL_HANG=1            hang forever before the final eval
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


def as_episode(r: dict, kind: str, step: int) -> dict:
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
    work = (TrainWorkInfo if kind == "train" else EvalWorkInfo)(step=step)
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
    if main_layout:
        from selfimprove.rl.config import engine_view
        from selfimprove.stack.dialects import V1

        if (name := cfg.get("run", {}).get("name")) and cfg.get("output_dir"):
            cfg["output_dir"] = str(Path(cfg["output_dir"]) / name)
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
    interval = int(os.environ.get("FAKE_RL_CKPT_EVERY") or ckpt.get("interval") or 0)
    resume = ckpt.get("resume_step")
    ev = orch.get("eval", {})
    eval_interval = int(ev.get("interval", max_steps))
    n_eval = sum(int(e.get("num_examples", 10)) * int(e.get("rollouts_per_example", 1)) for e in ev.get("env", [])) or 10
    canary = os.environ.get("FAKE_RL_CANARY", "")
    acc = env_f("FAKE_RL_ACC", 0.4)
    step_s = env_f("FAKE_RL_STEP_S", 0.005)
    crash_after = int(os.environ.get("FAKE_RL_CRASH_AFTER", "0"))
    rd = out if main_layout else out / "run_default"

    def orch_ckpt(step: int) -> Path:
        return (out / "checkpoints" if main_layout else rd / "checkpoints") / f"step_{step}" / "orchestrator"

    def episodes(step: int, kind: str) -> Path:
        if main_layout:
            return rd / "rollouts" / f"step_{step}" / kind / "all" / "traces.jsonl"
        return rd / "rollouts" / f"step_{step}" / f"{kind}_rollouts.jsonl"

    def write_rows(step: int, kind: str, rows: list[dict], torn: bool = False) -> None:
        """Seed records, or (main's tree) Episode records in all/ and, as main does, the effective subset."""
        if main_layout:
            rows = [as_episode(r, kind, step) for r in rows]
            write_jsonl(episodes(step, kind).parent.parent / "effective" / "traces.jsonl", rows)
        write_jsonl(episodes(step, kind), rows, torn=torn)

    if resume is not None:
        resume = int(resume)
        for need in (out / "checkpoints" / f"step_{resume}" / "trainer",
                     orch_ckpt(resume),
                     rd / "broadcasts" / f"step_{resume}" / "STABLE"):
            if not need.exists():
                die(f"FileNotFoundError: {need}")
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

    if start == 0 and ev.get("eval_base_model", True):
        write_rows(0, "eval", eval_rows(0, n_eval))
    for step in range(start + 1, max_steps + 1):
        time.sleep(step_s)
        rng = random.Random(step)
        p = 0.0 if os.environ.get("FAKE_RL_NO_SIGNAL") else min(0.95, acc + 0.3 * step / max_steps)
        train = [row(i // rpe, 1.0 if rng.random() < p else 0.0, train=True, canary="", step=step)
                 for i in range(min(batch, 64))]
        write_rows(step, "train", train)
        touch(rd / "broadcasts" / f"step_{step}" / "model.safetensors")
        touch(rd / "broadcasts" / f"step_{step}" / "STABLE", "")
        if interval and step % interval == 0:
            touch(out / "checkpoints" / f"step_{step}" / "trainer" / "__0_0.distcp")
            touch(out / "checkpoints" / f"step_{step}" / "trainer" / ".metadata")
            touch(orch_ckpt(step) / "progress.json", json.dumps({"step": step}))
            for name in ("model.safetensors", "config.json", "tokenizer.json"):
                touch(out / "weights" / f"step_{step}" / name, "{}")
        mean = sum(r["reward"] for r in train) / len(train)
        print(f"Step {step} | reward {mean:.3f}", flush=True)
        if crash_after and step >= crash_after:
            die(f"Traceback (most recent call last):\nRuntimeError: fake engine crashed after step {step}")
        if step % eval_interval == 0 and step != max_steps:
            write_rows(step, "eval", eval_rows(step, n_eval))

    if os.environ.get("FAKE_RL_HANG"):
        print("fake rl: hanging before the final eval", flush=True)
        while True:
            time.sleep(3600)
    time.sleep(env_f("FAKE_RL_EVAL_DELAY", 0))
    n_final = int(os.environ.get("FAKE_RL_EVAL_ROWS") or n_eval)
    write_rows(max_steps, "eval", eval_rows(max_steps, n_final), torn=bool(os.environ.get("FAKE_RL_TORN")))
    time.sleep(env_f("FAKE_RL_EXIT_DELAY", 0))
    print("RL training finished!", flush=True)
    if stamp := os.environ.get("FAKE_RL_END_STAMP"):
        Path(stamp).write_text(repr(time.time()))


if __name__ == "__main__":
    main()
