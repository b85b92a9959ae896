"""`selfimprove student build|profile`: the built-in CPU students made from a recipe (the registry's makers),
and `student build ENV`: the generic recipe's student of any single-turn env (rl/student_build.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from ..errors import UsageError
from ..rl import builtin_students
from ..rl.builtin_students import BuiltinStudent, StudentMaker
from ..ui import console, out
from ._common import JsonOpt, cli_errors, print_json

app = typer.Typer(
    no_args_is_help=True,
    help="""The built-in CPU students made from a recipe and shipped in a package.

selfimprove/tiny-arith is one: a seeded warm-up recipe
(selfimprove_arith/student/warmup.py) makes its weights, which live in
the package (src/selfimprove_arith/student/tiny-arith/) beside
recipe.json (the recipe and its hash) and profile.json (per-kind pass@k).
Rebuild them after changing the recipe: `selfimprove student build`.
tiny-arith's weaknesses were planted (wrong-answer habits per kind).

`selfimprove student build ENV` makes a student of any single-turn env
whose rows carry a reference answer, by one generic recipe with nothing
chosen per kind (rl/student_build.py): supervised on the env's TRAIN rows
drawn uniformly, stopped by a rule stated in advance on a held-out slice
of TRAIN. `--model build:ENV` uses it in a run (built on first use).
""",
)


def env_build(env_id: str, out_dir: Path | None, env_args: str | None, seed: int, max_steps: int | None,
              threads: int, json_: bool) -> None:
    """Run the generic recipe in the env's Python (a subprocess: verifiers and the env are imported there,
    never here), its progress line on the console; one line and exit 1 (an error) when the env is refused."""
    import json
    import shlex
    import sys

    from ..errors import ConfigError
    from ..rl.student_build import run_build

    # -P: `python -m` would put the working directory first on sys.path, and an env project folder there named
    # like the env's module (no __init__.py) would shadow the installed env
    cmd = [sys.executable, "-P", "-m", "selfimprove.rl.student_build_run", env_id, "--seed", str(seed), "--threads",
           str(threads), "--json"]
    cmd += ["--out", str(out_dir)] if out_dir else []
    cmd += ["--env-args", env_args] if env_args else []
    cmd += ["--max-steps", str(max_steps)] if max_steps is not None else []
    show = None if json_ else (lambda line: console.print(line, markup=False, highlight=False))
    rc, stdout, last_error = run_build(cmd, show)
    if rc != 0:
        raise ConfigError(last_error or f"the generic student build of '{env_id}' exited {rc}; run "
                          f"`{shlex.join(c for c in cmd if c != '--json')}` to see its output")
    record = json.loads(stdout.strip().splitlines()[-1])
    if json_:
        print_json(record)
        return
    last = record["final_check"]
    out.print(f"wrote {record['out']} (recipe {record['recipe_hash']}, seed {record['recipe']['seed']}): stopped at "
              f"step {record['stopped_at_step']} by {'the rule' if record['stop_reason'] == 'rule' else 'the step cap'} "
              f"({record['stopping_rule']}); held-out mean reward {last['mean_reward']:.2f} on "
              f"{record['holdout_rows']} TRAIN rows, memorisation share {record['memorisation_share']:.2f}; built in "
              f"{record['build_wall_s']:.0f} s on {record['threads']} thread(s)"
              + (f"; use it with --model {record['model_id']}" if record.get("model_id") else ""), markup=False)
    t = Table(title=f"held-out pass@1 by group ({record['grouping']['name']}) at the stop")
    for col in ("group", "n", "pass@1", "guess prior", "above prior", "learning", "solved"):
        t.add_column(col, justify="left" if col == "group" else "right")
    for g, row in last["groups"].items():
        t.add_row(g, str(row["n"]), f"{row['pass@1']:.2f}", f"{row['guess_prior']:.2f}", f"{row['above_prior']:+.2f}",
                  "yes" if row["learning"] else "no", "yes" if row["solved"] else "no")
    out.print(t)


def rebuildable(model_id: str | None) -> tuple[BuiltinStudent, StudentMaker]:
    """The registered student `model_id` (default: the only one made from a recipe) and its maker."""
    makers = [s for s in builtin_students.registered().values() if s.maker is not None]
    if model_id is None:
        if len(makers) != 1:
            raise UsageError(f"name the student to build: one of {', '.join(s.id for s in makers) or 'none'}")
        student = makers[0]
    else:
        student = builtin_students.find(model_id)
        if student is None:
            raise UsageError(f"student '{model_id}': no such built-in student; built-in: "
                             f"{', '.join(builtin_students.ids())}")
        if student.maker is None:
            raise UsageError(f"student '{model_id}' is not made from a recipe here (nothing to build); the ones that "
                             f"are: {', '.join(s.id for s in makers) or 'none'}")
    return student, student.maker()


def profile_table(profile: dict[str, Any], title: str) -> Table:
    t = Table(title=title)
    for col in ("kind", "greedy", "pass@1", f"pass@{profile['k']}"):
        t.add_column(col, justify="left" if col == "kind" else "right")
    for kind, row in profile["kinds"].items():
        t.add_row(kind, *(f"{row[m]:.2f}" for m in ("greedy", "pass@1", f"pass@{profile['k']}")))
    return t


def settings(profile: dict[str, Any]) -> str:
    return f"{profile['n_per_kind']} problems per kind, seed {profile['seed']}, T={profile['temperature']}"


@app.command("build")
@cli_errors
def build(
    model_id: Annotated[Optional[str], typer.Argument(help="The built-in student to rebuild (default: the only one made from a recipe, selfimprove/tiny-arith), or an env id (or build:ENV) to make its student by the generic recipe.")] = None,
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="Where to write the student (default: the shipped directory in the package).")] = None,
    profile: Annotated[bool, typer.Option("--profile/--no-profile", help="Measure profile.json after the build (~2 min).")] = True,
    env_args: Annotated[Optional[str], typer.Option(help="An env's build only: JSON object for its load_environment (part of the recipe hash).")] = None,
    seed: Annotated[int, typer.Option(help="An env's build only: the recipe's seed (row order, held-out slice, initial weights).")] = 0,
    max_steps: Annotated[Optional[int], typer.Option(help="An env's build only: the step cap (default: the recipe's, 3000).")] = None,
    threads: Annotated[int, typer.Option(min=1, help="An env's build only: torch threads (1 is fastest on a busy 2-core host).")] = 1,
    json_: JsonOpt = False,
) -> None:
    """Rebuild a built-in student from its recipe (selfimprove/tiny-arith: ~5 min on 2 cores), or make an env's
    student by the generic recipe (into the cache, or --out; `--model build:ENV` then uses the cached one).

    Writes model.safetensors, config.json, tokenizer files, recipe.json (the
    recipe, its hash, torch version, threads, build time) and profile.json into
    a temporary directory, then renames it into place: a killed build leaves
    the old one intact.

    Example usage:

        selfimprove student build
        selfimprove student build --out /tmp/tiny-arith --no-profile
        selfimprove student build si-reasoning-gym \\
            --env-args '{"num_train_examples": 3000}'
    """
    if model_id is not None and (model_id.startswith("build:") or builtin_students.find(model_id) is None):
        env_id = model_id.removeprefix("build:")
        env_build(env_id, out_dir, env_args, seed, max_steps, threads, json_)
        return
    if env_args is not None or max_steps is not None or seed != 0:
        raise UsageError("--env-args, --seed and --max-steps are for an env's build (selfimprove student build ENV); "
                         f"{model_id or 'the built-in student'} is made by its own recipe")
    student, maker = rebuildable(model_id)
    target = out_dir or maker.shipped_dir(student.id)
    log = (lambda s: None) if json_ else (lambda s: console.print(s, markup=False, highlight=False))
    log(f"building {student.id} from its recipe into {target}")
    result = maker.build_and_save(target, profile=profile, log=log)
    if json_:
        print_json({"out": str(target), **result})
        return
    if result["profile"]:
        out.print(profile_table(result["profile"], f"{student.id} per-kind profile ({settings(result['profile'])})"))
    r = result["recipe"]
    out.print(f"wrote {target} (recipe {r['recipe_hash']}, built in {r['build_wall_s']:.0f} s, "
              f"torch {r['torch']}, {r['threads']} threads)", markup=False)


@app.command("profile")
@cli_errors
def profile_cmd(
    model: Annotated[Optional[str], typer.Argument(help="A built-in id or a local HF model directory (default: the only built-in student made from a recipe, selfimprove/tiny-arith).")] = None,
    of: Annotated[Optional[str], typer.Option("--of", help="The built-in student whose measurement to use for a model directory (default: the only one made from a recipe).")] = None,
    n_per_kind: Annotated[Optional[int], typer.Option(help="Fresh problems per kind (default: the setting of the student's shipped profile.json).")] = None,
    k: Annotated[Optional[int], typer.Option(help="Samples per problem for pass@k, at T=1.0 (default: as in the shipped profile.json).")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed of the problems and of sampling (default: as in the shipped profile.json).")] = None,
    json_: JsonOpt = False,
) -> None:
    """Measure a student's per-kind greedy / pass@1 / pass@k on fresh problems of its env
    (selfimprove/tiny-arith: selfimprove-arith).

    With the shipped student and the shipped settings, also says whether the
    measurement agrees with its profile.json. A model directory (e.g. a trained
    checkpoint of a built-in student) is measured the way --of's student is.

    Example usage:

        selfimprove student profile
        selfimprove student profile runs/R/iter_0/prime_out/weights/step_50
    """
    from ..rl.student import resolve_model

    if (n_per_kind is not None and n_per_kind < 1) or (k is not None and k < 1):
        raise UsageError("--n-per-kind and --k must be at least 1")
    if of is None and model is not None and builtin_students.find(model) is not None:
        of = model
    student, maker = rebuildable(of)
    model = model or student.id
    n_per_kind = maker.PROFILE_N_PER_KIND if n_per_kind is None else n_per_kind
    k = maker.PROFILE_K if k is None else k
    seed = maker.PROFILE_SEED if seed is None else seed
    path = resolve_model(model, log=lambda s: console.print(s, markup=False, highlight=False))
    measured = maker.measure_profile(path, n_per_kind=n_per_kind, k=k, seed=seed)
    reference = maker.read_json(path / maker.PROFILE_FILE)
    same_settings = reference is not None and all(reference.get(f) == measured[f] for f in ("n_per_kind", "k", "seed"))
    disagreements = maker.compare_profiles(measured, reference) if same_settings else None
    if json_:
        print_json({"model": model, "path": str(path), **measured, "disagrees_with_profile_json": disagreements})
        return
    out.print(profile_table(measured, f"{model} per-kind profile ({settings(measured)})"))
    if disagreements is not None:
        verdict = "agrees with" if not disagreements else "DIFFERS from"
        out.print(f"{verdict} {path / maker.PROFILE_FILE} (|greedy diff| <= 0.10, |pass@{k} diff| <= 0.15 per kind)"
                  + "".join(f"\n  {d}" for d in disagreements), markup=False)
