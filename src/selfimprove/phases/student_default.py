"""Which student and engine a bootstrap gets when the user names neither (issue 43, item 5).

    model, engine, note = default_student(opts.model, opts.engine, dataset, hub_id, slurm)

The skill's procedure's default is Qwen/Qwen3-0.6B on prime-rl: right on a GPU box, useless on a laptop, where
it used to be picked silently and fail much later (the local engine does not download hub models;
prime-rl needs GPUs and a checkout). So when `--model` is not given, `--engine` is auto or local,
there is no `--slurm` (its GPUs are on other nodes), no $PRIME_RL_DIR and no GPU in sight
(engines/preflight.gpus_visible: CUDA_VISIBLE_DEVICES, else `nvidia-smi -L`), the run gets the CPU
engine and a built-in student instead, and `note` says so in one line:

- the env's own built-in student where there is one (selfimprove-arith: selfimprove/tiny-arith);
- else `build:ENV`, the generic student made from the env's TRAIN rows (rl/student_build.py),
  built on first use at baseline, or before with `selfimprove student build ENV`.

Why choose rather than refuse: a bare `selfimprove bootstrap DATASET` on a laptop is a request to
try the loop here, and the only students that can train here are these; the line names the
procedure's choice and the flags that restore it. The budget, iterations and batch stay the procedure's
(the line does not change what it does not say).

SELFIMPROVE_STUDENT_DEFAULT=procedure keeps the procedure's default on any machine (e.g. to prepare a run
dir for a GPU box here); the test suite sets it so its fixtures keep their recorded defaults.
"""

from __future__ import annotations

import os

SEED_MODEL = "Qwen/Qwen3-0.6B"
# Envs whose package ships a student made for them (the model id the demo uses).
OWN_STUDENT = {"selfimprove-arith": "selfimprove/tiny-arith"}
POLICY_ENV = "SELFIMPROVE_STUDENT_DEFAULT"  # "procedure": always the procedure's default; anything else / unset: choose by machine
POLICY_KEEP = ("procedure", "seed")  # "seed": the name this value had first


def gpu_machine() -> tuple[bool, str]:
    """(whether prime-rl could run here, why): a checkout in $PRIME_RL_DIR or a visible GPU."""
    if os.environ.get("PRIME_RL_DIR"):
        return True, "$PRIME_RL_DIR is set"
    from ..engines.preflight import gpus_visible

    count, how = gpus_visible()
    return count > 0, how


def env_name(dataset: str, hub_id: str | None) -> str:
    """The env id a `build:` student is made from: the hub id's name (owner/ and @version dropped), else the dataset."""
    return hub_id.split("/")[-1].split("@")[0] if hub_id else dataset


def default_student(model: str | None, engine: str, dataset: str, hub_id: str | None,
                    slurm: str | None) -> tuple[str, str, str | None]:
    """(model, engine, the one line to show or None) for the flags as given; `model` None = not given."""
    if model is not None:
        return model, engine, None
    if engine == "prime-rl" or slurm or os.environ.get(POLICY_ENV) in POLICY_KEEP:
        return SEED_MODEL, engine, None
    gpu, why = gpu_machine()
    if gpu:
        return SEED_MODEL, engine, None
    env = env_name(dataset, hub_id)
    chosen = OWN_STUDENT.get(env, f"build:{env}")
    what = "the env's own" if env in OWN_STUDENT else "the generic student made from the env's TRAIN rows, built on first use"
    note = (f"no GPU seen ({why}) and $PRIME_RL_DIR unset, so the student is {chosen} ({what}) on the CPU engine, "
            f"not the skill's procedure's {SEED_MODEL} on prime-rl; pass --model and --engine to choose")
    return chosen, "local", note
