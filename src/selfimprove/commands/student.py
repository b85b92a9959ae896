"""`selfimprove student build|profile`: the built-in CPU students made from a recipe (the registry's makers)."""

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
""",
)


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
    model_id: Annotated[Optional[str], typer.Argument(help="The built-in student to rebuild (default: the only one made from a recipe, selfimprove/tiny-arith).")] = None,
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="Where to write the student (default: the shipped directory in the package).")] = None,
    profile: Annotated[bool, typer.Option("--profile/--no-profile", help="Measure profile.json after the build (~2 min).")] = True,
    json_: JsonOpt = False,
) -> None:
    """Rebuild a built-in student from its recipe (selfimprove/tiny-arith: ~5 min on 2 cores).

    Writes model.safetensors, config.json, tokenizer files, recipe.json (the
    recipe, its hash, torch version, threads, build time) and profile.json into
    a temporary directory, then renames it into place: a killed build leaves
    the old one intact.

    Example usage:

        selfimprove student build
        selfimprove student build --out /tmp/tiny-arith --no-profile
    """
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
