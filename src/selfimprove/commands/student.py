"""`selfimprove student build|profile`: the built-in CPU student that ships with the project."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from ..errors import UsageError
from ..rl import shipped
from ..ui import console, out
from ._common import JsonOpt, cli_errors, print_json

app = typer.Typer(
    no_args_is_help=True,
    help="""The built-in CPU student selfimprove/tiny-arith, shipped with the package.

Its weights are made by the project's seeded warm-up recipe (rl/warmup.py) and
live in the package (src/selfimprove/rl/students/tiny-arith/) beside
recipe.json (the recipe and its hash) and profile.json (per-kind pass@k).
Rebuild them after changing the recipe: `selfimprove student build`.
""",
)

# = rl.student.BUILTIN_IDS[0] (tests/test_cli_help.py checks it). Not imported from there: rl.student
# imports torch and transformers, ~13 s of CPU that every `selfimprove` command would pay at start.
MODEL_ID = "selfimprove/tiny-arith"


def profile_table(profile: dict[str, Any], title: str) -> Table:
    t = Table(title=title)
    for col in ("kind", "greedy", "pass@1", f"pass@{profile['k']}"):
        t.add_column(col, justify="left" if col == "kind" else "right")
    for kind, greedy, p1, pk in shipped.profile_rows(profile):
        t.add_row(kind, f"{greedy:.2f}", f"{p1:.2f}", f"{pk:.2f}")
    return t


def settings(profile: dict[str, Any]) -> str:
    return f"{profile['n_per_kind']} problems per kind, seed {profile['seed']}, T={profile['temperature']}"


@app.command("build")
@cli_errors
def build(
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="Where to write the student (default: the shipped directory in the package).")] = None,
    profile: Annotated[bool, typer.Option("--profile/--no-profile", help="Measure profile.json after the build (~2 min).")] = True,
    json_: JsonOpt = False,
) -> None:
    """Rebuild the built-in student from the warm-up recipe (~5 min on 2 cores).

    Writes model.safetensors, config.json, tokenizer files, recipe.json (the
    recipe, its hash, torch version, threads, build time) and profile.json into
    a temporary directory, then renames it into place: a killed build leaves
    the old one intact.

    Example usage:

        selfimprove student build
        selfimprove student build --out /tmp/tiny-arith --no-profile
    """
    target = out_dir or shipped.shipped_dir(MODEL_ID)
    log = (lambda s: None) if json_ else (lambda s: console.print(s, markup=False, highlight=False))
    log(f"building {MODEL_ID} from the warm-up recipe into {target}")
    result = shipped.build_and_save(target, profile=profile, log=log)
    if json_:
        print_json({"out": str(target), **result})
        return
    if result["profile"]:
        out.print(profile_table(result["profile"], f"{MODEL_ID} per-kind profile ({settings(result['profile'])})"))
    r = result["recipe"]
    out.print(f"wrote {target} (recipe {r['recipe_hash']}, built in {r['build_wall_s']:.0f} s, "
              f"torch {r['torch']}, {r['threads']} threads)", markup=False)


@app.command("profile")
@cli_errors
def profile_cmd(
    model: Annotated[str, typer.Argument(help="A built-in id or a local HF model directory.")] = MODEL_ID,
    n_per_kind: Annotated[int, typer.Option(help="Fresh problems per kind.")] = shipped.PROFILE_N_PER_KIND,
    k: Annotated[int, typer.Option(help="Samples per problem for pass@k (at T=1.0).")] = shipped.PROFILE_K,
    seed: Annotated[int, typer.Option(help="Seed of the problems and of sampling.")] = shipped.PROFILE_SEED,
    json_: JsonOpt = False,
) -> None:
    """Measure a student's per-kind greedy / pass@1 / pass@k on fresh selfimprove-arith problems.

    With the shipped student and the shipped settings, also says whether the
    measurement agrees with its profile.json.

    Example usage:

        selfimprove student profile
        selfimprove student profile runs/R/iter_0/prime_out/weights/step_50 --json
    """
    from ..rl.student import resolve_model

    if n_per_kind < 1 or k < 1:
        raise UsageError("--n-per-kind and --k must be at least 1")
    path = resolve_model(model, log=lambda s: console.print(s, markup=False, highlight=False))
    measured = shipped.measure_profile(path, n_per_kind=n_per_kind, k=k, seed=seed)
    reference = shipped.read_json(path / shipped.PROFILE_FILE)
    same_settings = reference is not None and all(reference.get(f) == measured[f] for f in ("n_per_kind", "k", "seed"))
    disagreements = shipped.compare_profiles(measured, reference) if same_settings else None
    if json_:
        print_json({"model": model, "path": str(path), **measured, "disagrees_with_profile_json": disagreements})
        return
    out.print(profile_table(measured, f"{model} per-kind profile ({settings(measured)})"))
    if disagreements is not None:
        verdict = "agrees with" if not disagreements else "DIFFERS from"
        out.print(f"{verdict} {path / shipped.PROFILE_FILE} (|greedy diff| <= 0.10, |pass@{k} diff| <= 0.15 per kind)"
                  + "".join(f"\n  {d}" for d in disagreements), markup=False)
