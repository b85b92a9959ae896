"""`selfimprove bootstrap`: Phase 0."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..models import SEED_EVAL_EXAMPLES, SEED_ROLLOUTS_PER_EXAMPLE, SEED_STEPS_PER_RUN
from ..phases.bootstrap import DEFAULT_MODEL, BootstrapOptions, bootstrap
from ..grouping import check_group_by
from ..ui import out
from ._common import JsonOpt, cli_errors, print_json


def options_from_params(params: dict) -> BootstrapOptions:
    """BootstrapOptions from this command's parsed parameters (also used by `selfimprove run`)."""
    fields = BootstrapOptions.__dataclass_fields__
    return BootstrapOptions(**{k: v for k, v in params.items() if k in fields})


@cli_errors
def command(
    dataset: Annotated[str, typer.Argument(help="Dataset name, e.g. gsm8k or selfimprove-arith.")],
    model: Annotated[Optional[str], typer.Option(help=f"Student model: HF id, local dir, or a built-in CPU student (selfimprove/tiny-arith, build:ENV). Default: {DEFAULT_MODEL} (the skill's procedure's); with no GPU, no $PRIME_RL_DIR and no --slurm, a built-in student on the CPU engine instead, said in one line.", show_default=False)] = None,
    budget: Annotated[str, typer.Option(help="Phase 3 wall-clock cap, e.g. 10h, 90m, 1h30m. Phase 4 runs after it.")] = "10h",
    hub_id: Annotated[Optional[str], typer.Option(help="Real environment id; default primeintellect/<dataset>.")] = None,
    max_iters: Annotated[int, typer.Option(help="Total iterations including iter_0.")] = 15,
    batch_size: Annotated[int, typer.Option(help="TOTAL rollouts per step (unique prompts x rollouts per example).")] = 512,
    init_from: Annotated[Optional[str], typer.Option(help="Absolute path of a prior run to reuse as iter_0 (skips training it).")] = None,
    runs_dir: Annotated[str, typer.Option(envvar="SELFIMPROVE_RUNS_DIR", help="Where run dirs are made.")] = "runs",
    env_args: Annotated[Optional[str], typer.Option(help="JSON object passed to load_environment, e.g. '{\"num_train_examples\": 2000}'.")] = None,
    env_path: Annotated[Optional[str], typer.Option(help="Local environment project to install before introspection.")] = None,
    engine: Annotated[str, typer.Option(help="prime-rl (GPU), local (CPU selfimprove-rl) or auto (local for selfimprove/* students).")] = "auto",
    config: Annotated[Optional[str], typer.Option(help="Canonical rl.toml for iter_0; default: found by dataset name.")] = None,
    wandb_project: Annotated[Optional[str], typer.Option(help="W&B project; empty = no W&B.")] = None,
    slurm: Annotated[Optional[str], typer.Option(help="Run every training job on SLURM: a prime-rl overlay TOML holding [slurm] (and [deployment] for several nodes), passed to each launch as `@ FILE`; see docs/how-to/slurm.md.")] = None,
    steps_per_run: Annotated[int, typer.Option(help="New training steps per run (the procedure's: 100; lower only for smoke runs).")] = SEED_STEPS_PER_RUN,
    rollouts_per_example: Annotated[int, typer.Option(help="Rollouts per prompt (the procedure's: 16).")] = SEED_ROLLOUTS_PER_EXAMPLE,
    eval_examples: Annotated[int, typer.Option(help="Eval examples per iteration (the procedure's: 200).")] = SEED_EVAL_EXAMPLES,
    allow_small_batch: Annotated[bool, typer.Option("--allow-small-batch", help="Allow < 16 unique prompts per step (smoke runs; recorded).")] = False,
    stack: Annotated[Optional[str], typer.Option(help="prime-rl / verifiers dialect: seed (prime-rl < 0.8, classic envs) or v1 (prime-rl >= 0.8, verifiers v1 Tasksets). Default: detected from $PRIME_RL_DIR and the env's API.")] = None,
    env_python: Annotated[Optional[str], typer.Option(help="Python that loads the env (introspection, the generator, gates, package install + verify): must import verifiers. Default: $PRIME_RL_DIR/.venv/bin/python for --engine prime-rl with a checkout there, else this interpreter. Recorded in run.json.")] = None,
    group_by: Annotated[Optional[str], typer.Option("--group-by", help="How the weakness statistics group prompts (recorded in run.json): auto (default: the env's task field, else the prompt template, else the answer type; a degenerate grouping falls back, stated), task, template, answer, or path/to/file.py:FUNCTION.")] = None,
    max_completion_tokens: Annotated[Optional[int], typer.Option("--max-completion-tokens", help="Cap on every arm's train and eval completion budget, in tokens (recorded in run.json). Default: the canonical config's (the procedure's 1024 train / 2048 eval), or for a config generated from the env, a budget that follows its reference answers' lengths.", show_default=False)] = None,
    json_: JsonOpt = False,
) -> None:
    """Phase 0: validate the flags and create the run directory.

    Prints RUN_DIR on stdout (a JSON object with --json) so an agent can capture it.

    Example usage:

        RUN_DIR=$(selfimprove bootstrap selfimprove-arith \\
            --model selfimprove/tiny-arith --budget 15m)
    """
    check_group_by(group_by)
    rd = bootstrap(options_from_params(locals()))
    if json_:
        print_json({"run_dir": str(rd.root), **rd.read_run().model_dump(mode="json")})
    else:
        out.print(str(rd.root), markup=False)
