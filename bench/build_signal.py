"""iter_0 signal of a generic-recipe student (selfimprove student build ENV --out DIR): 8 samples at T=1
(seed 0) on TRAIN prompts after the sealed evaluated rows, reward spread per prompt, by the env's task field.

    PYTHONPATH=src:envs/si_reasoning_gym python bench/build_signal.py /tmp/rg si-reasoning-gym \\
        '{"num_train_examples": 3000}' 32

What it does not cover: the GRPO run itself, other seeds, and envs with an eval split (it skips the
first `evaluated_rows` train rows that build.json names only for an env without one).
"""

import json
import statistics
import sys

import torch

from selfimprove.grouping import task_label
from selfimprove.rl.rollouts import EnvSpec, load_env, run_rollouts, split_rows
from selfimprove.rl.student import load_student


def main(out: str, env_id: str, args: dict, n: int) -> None:
    torch.set_num_threads(1)  # one thread: on a shared 2-core host it ran far faster than two
    env = load_env(env_id, args)
    build = json.load(open(f"{out}/build.json"))
    sealed = build["rows"]["evaluated_rows"] if build["rows"]["eval_source"] == "train_fallback" else 0
    rows = split_rows(env, "train")[sealed:sealed + n]  # the first TRAIN rows after the evaluated ones
    model, tok = load_student(out)
    spec = EnvSpec(env_id, env_id, args, None, env, rows)
    recs = run_rollouts(model, tok, [(spec, r) for r in rows], n=8, temperature=1.0, max_tokens=64,
                        generator=torch.Generator().manual_seed(0))
    by: dict = {}
    for r in recs:
        by.setdefault((task_label(r["info"]), r["example_id"]), []).append(r["reward"])
    groups: dict = {}
    for (task, _), xs in by.items():
        g = groups.setdefault(task, {"prompts": 0, "spread": 0, "reward": 0.0, "sd": 0.0})
        g["prompts"] += 1
        g["spread"] += len(set(xs)) > 1
        g["reward"] += sum(xs) / len(xs)
        g["sd"] += statistics.pstdev(xs)
    for task, g in sorted(groups.items(), key=lambda kv: str(kv[0])):
        print(f"{task}: prompts {g['prompts']}, with reward spread {g['spread']}, mean reward "
              f"{g['reward'] / g['prompts']:.3f}, mean within-prompt sd {g['sd'] / g['prompts']:.3f}")
    sds = [statistics.pstdev(xs) for xs in by.values()]
    print(f"all: prompts {len(by)}, with spread {sum(len(set(x)) > 1 for x in by.values())}, mean reward "
          f"{sum(r['reward'] for r in recs) / len(recs):.3f}, mean within-prompt sd {sum(sds) / len(sds):.3f} "
          "(n=8 samples at T=1, seed 0)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4]))
