"""The built-in student that ships with the project: where it lives, how it is
rebuilt from the warm-up recipe, and how its per-kind profile is measured and
compared.

    src/selfimprove_arith/student/tiny-arith/
        model.safetensors config.json generation_config.json tokenizer*.json ...   (HF files)
        recipe.json    the recipe's constants, its hash, torch version, threads, build wall time
        profile.json   per-kind greedy / pass@1 / pass@k measured on these weights

The directory sits inside the package so a wheel carries it. The registry entry
(this package's TINY_ARITH) resolves the id to it only while recipe.json's hash
equals `warmup.recipe_hash()`: a recipe changed without a rebuild is stale, and
the student is then built into the cache instead. `selfimprove student build`
(or `make student`) rebuilds it: this module is the entry's StudentMaker
(selfimprove.rl.builtin_students).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

STUDENTS_DIR = Path(__file__).resolve().parent  # one directory per shipped id, beside this module
RECIPE_FILE = "recipe.json"
PROFILE_FILE = "profile.json"

# How the shipped profile is measured (stated in profile.json, reused by `student profile`).
PROFILE_N_PER_KIND = 100
PROFILE_K = 16
PROFILE_SEED = 0
PROFILE_TEMPERATURE = 1.0


def shipped_dir(model_id: str) -> Path:
    """Where the shipped copy of a built-in id lives: selfimprove/tiny-arith -> students/tiny-arith."""
    return STUDENTS_DIR / model_id.split("/", 1)[-1]


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def shipped_hash(model_id: str) -> str | None:
    """The recipe hash the shipped weights were built from (None if nothing usable is shipped)."""
    d = shipped_dir(model_id)
    meta = read_json(d / RECIPE_FILE)
    if meta is None or not (d / "model.safetensors").is_file():
        return None
    return meta.get("recipe_hash")


def current_recipe() -> dict[str, Any]:
    """The warm-up recipe as plain JSON (recipe.json's "recipe")."""
    from .warmup import recipe

    return json.loads(json.dumps(recipe(), default=str))


def recipe_record(build_wall_s: float) -> dict[str, Any]:
    """recipe.json: what made these weights and on what (torch's CPU kernels decide the last bits)."""
    import torch

    from .warmup import recipe_hash

    return {
        "recipe_hash": recipe_hash(),
        "recipe": current_recipe(),
        "torch": torch.__version__,
        # information, not identity: the libraries that built these weights (the hash covers none of them)
        "built_with": built_with(),
        "threads": torch.get_num_threads(),
        # the kernel path (e.g. AVX2 vs AVX512) and the CPU: a rebuild at the shipping commit with the same torch
        # and threads was not bit-identical to the shipped weights (2026-12-02); record what else can differ
        "cpu": {"capability": torch.backends.cpu.get_cpu_capability(), "model": _cpu_model()},
        "build_wall_s": round(build_wall_s, 1),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def built_with() -> dict[str, str | None]:
    """The versions of the libraries that decide how the warm-up computes."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in ("torch", "transformers", "tokenizers", "safetensors"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def measure_profile(model_path: Path, *, n_per_kind: int = PROFILE_N_PER_KIND, k: int = PROFILE_K,
                    seed: int = PROFILE_SEED) -> dict[str, Any]:
    """profile.json: per-kind greedy / pass@1 / pass@k of the weights in `model_path`, with the settings."""
    from .profile import per_kind_pass_at_k

    started = time.perf_counter()
    kinds = per_kind_pass_at_k(Path(model_path), k=k, n_per_kind=n_per_kind, temperature=PROFILE_TEMPERATURE, seed=seed)
    return {"n_per_kind": n_per_kind, "k": k, "seed": seed, "temperature": PROFILE_TEMPERATURE,
            "measure_wall_s": round(time.perf_counter() - started, 1),
            "kinds": {kind: {m: round(v, 4) for m, v in row.items()} for kind, row in kinds.items()}}


def write_json(path: Path, obj: dict[str, Any]) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n")


def build_and_save(out: Path, *, profile: bool = True, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Warm up a student from the recipe and write it, recipe.json and profile.json to `out`.

    Atomic: everything is written into a temporary sibling of `out` and renamed
    into place at the end, so a killed build leaves the old `out` untouched.
    Returns {"recipe": ..., "profile": ... or None}.
    """
    from selfimprove.rl.student import save_student

    from .warmup import warm_up

    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.building.", dir=out.parent))
    try:
        started = time.perf_counter()
        model, tok = warm_up(log=log)
        build_wall_s = time.perf_counter() - started
        save_student(model, tok, tmp)
        recipe = recipe_record(build_wall_s)
        write_json(tmp / RECIPE_FILE, recipe)
        log(f"built in {build_wall_s:.0f} s (recipe {recipe['recipe_hash']}, torch {recipe['torch']}, "
            f"{recipe['threads']} threads)")
        prof = None
        if profile:
            log(f"measuring the per-kind profile ({PROFILE_N_PER_KIND} problems per kind, pass@{PROFILE_K}) ...")
            prof = measure_profile(tmp)
            write_json(tmp / PROFILE_FILE, prof)
        # mkdtemp makes the directory 0700 (and safetensors may write 0600): a shipped or
        # shared student must be readable by everyone, as any checkout or wheel would be.
        os.chmod(tmp, 0o755)
        for f in tmp.iterdir():
            os.chmod(f, 0o644)
        replace_dir(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"recipe": recipe, "profile": prof}


def replace_dir(new: Path, final: Path) -> None:
    """Put directory `new` at `final`; an old `final` is moved aside first, then removed."""
    old = None
    if final.exists():
        old = final.with_name(f".{final.name}.old.{os.getpid()}")
        os.replace(final, old)
    os.replace(new, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def compare_profiles(measured: dict[str, Any], reference: dict[str, Any], *, greedy_tol: float = 0.10,
                     pass_k_tol: float = 0.15) -> list[str]:
    """Every kind whose greedy or pass@k differs from the reference by more than the tolerance
    (and every kind present in one profile only). Empty list = the profiles agree."""
    k = reference["k"]
    problems = []
    a, b = measured["kinds"], reference["kinds"]
    for kind in sorted(set(a) | set(b)):
        if kind not in a or kind not in b:
            problems.append(f"{kind}: only in the {'measured' if kind in a else 'reference'} profile")
            continue
        for metric, tol in (("greedy", greedy_tol), (f"pass@{k}", pass_k_tol)):
            diff = a[kind][metric] - b[kind][metric]
            if abs(diff) > tol:
                problems.append(f"{kind} {metric}: {a[kind][metric]:.2f} vs shipped {b[kind][metric]:.2f} "
                                f"(|diff| {abs(diff):.2f} > {tol:.2f})")
    return problems


# The bands the loop depends on. A kind is "solved" when nearly every sample is right,
# "hopeless" when even 16 samples rarely hold one right answer (GRPO groups are all
# wrong: no gradient), and "learnable" in between (SwS's band). The thresholds sit
# far from the shipped student's values so sampling noise does not flip a band.
SOLVED_PASS_1 = 0.875
HOPELESS_PASS_K = 0.25


def kind_band(row: dict[str, float], k: int) -> str:
    """solved | learnable | hopeless, from one kind's pass@1 and pass@k."""
    if row[f"pass@{k}"] < HOPELESS_PASS_K:
        return "hopeless"
    return "solved" if row["pass@1"] >= SOLVED_PASS_1 else "learnable"


def compare_bands(measured: dict[str, Any], reference: dict[str, Any]) -> list[str]:
    """Every kind whose band differs between two profiles measured with the same settings.

    This is what survives a rebuild on another CPU: per-kind accuracies drift there
    (see `compare_profiles`), but which kinds RL can learn from must not."""
    k = reference["k"]
    a, b = measured["kinds"], reference["kinds"]
    problems = [f"{kind}: only in the {'measured' if kind in a else 'reference'} profile"
                for kind in sorted(set(a) ^ set(b))]
    for kind in [kind for kind in b if kind in a]:
        got, want = kind_band(a[kind], k), kind_band(b[kind], k)
        if got != want:
            problems.append(f"{kind}: {got} (pass@1 {a[kind]['pass@1']:.2f}, pass@{k} {a[kind][f'pass@{k}']:.2f}) "
                            f"vs shipped {want} (pass@1 {b[kind]['pass@1']:.2f}, pass@{k} {b[kind][f'pass@{k}']:.2f})")
    return problems


def weights_identical(a: Path, b: Path) -> bool:
    """True when two model.safetensors hold the same tensors bit for bit."""
    import torch
    from safetensors.torch import load_file

    ta, tb = load_file(str(Path(a) / "model.safetensors")), load_file(str(Path(b) / "model.safetensors"))
    return ta.keys() == tb.keys() and all(ta[n].dtype == tb[n].dtype and torch.equal(ta[n], tb[n]) for n in ta)
