"""`selfimprove-rl`: the embedded CPU engine behind prime-rl's `rl` command contract.

    selfimprove-rl @ configs/selfimprove-arith/rl.toml --output-dir out
    selfimprove-rl @ rl.toml @ overlay.toml --max-steps 20 --orchestrator.batch-size 64 --output-dir out
    selfimprove-rl @ rl.toml --ckpt.resume-step -1 --max-steps 200 --output-dir out    # seed dialect
    selfimprove-rl @ rl.toml --resume.step 100 --output-dir out --run.name prime_out   # prime-rl main
    selfimprove-rl @ rl.toml @ slurm.toml --output-dir out     # [slurm]: sbatch it, print the job id, exit 0

Files deep-merge left to right, CLI flags win, lists are replaced whole (the
prime-rl rules, implemented in selfimprove.stack). Prints "RL training
finished!" and exits 0 on success; on failure prints one line to stderr and
exits non-zero (1 = config or run error, 130 = interrupted).
"""

from __future__ import annotations

import os
import sys
import traceback

# Before torch loads: OpenMP threads that spin while waiting turn a busy 2-core
# machine into a 20-50x slowdown (measured: 32-row sampling 24-49 s spinning,
# 0.6-1.8 s passive, with other jobs running). Passive waiting costs ~nothing alone.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from ..errors import SelfImproveError

USAGE = "usage: selfimprove-rl @ config.toml [@ more.toml ...] [--dotted.key value ...] --output-dir DIR"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip() + "\n\n" + USAGE)
        return 0 if argv else 2
    _quiet()
    try:
        from ..stack.dialects import dialect_of_argv
        from .slurm_submit import submit, wants_slurm

        dialect = dialect_of_argv(argv)  # prime-rl seed-era or >= 0.8 keys: both are read
        if (slurm := wants_slurm(argv, dialect)) is not None:  # as prime-rl's rl: write an sbatch script, submit it
            return submit(argv, dialect, *slurm)  # before torch is imported: 0.2 s a launch, not 5
        from .config import engine_view, main_extras, resolve
        from .train import run

        raw, _files = dialect.parse_rl_argv(argv)
        extras = main_extras(raw) if dialect.spells_v08 else {}
        raw = engine_view(raw, dialect)
        cfg = resolve(raw).model_copy(update={"layout": dialect.layout, "tasksets": dialect.trains_tasksets, **extras})
        run(cfg, raw)
    except SelfImproveError as e:
        print(f"selfimprove-rl: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("selfimprove-rl: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # an engine bug or an env that breaks: one line, traceback below it
        traceback.print_exc(file=sys.stderr)
        print(f"selfimprove-rl: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print("RL training finished!")
    return 0


def _quiet() -> None:
    """No progress bars or advisory warnings from datasets/transformers in the engine's output."""
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


if __name__ == "__main__":
    sys.exit(main())
