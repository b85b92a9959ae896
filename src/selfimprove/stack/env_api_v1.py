"""What the phases ask of a verifiers v1 env: the `env_api` of the v1 dialect (stack/dialects.py V1).

The same names as in verifiers_classic (the seed dialect's `env_api`), so no phase branches on
the version: `describe_env` (introspect), `real_env` (which rows train and evaluate),
`round_trip_gate`, `eval_ngrams` and `eval_ngrams_key` (the dataset gate), `generator_skeleton` (the teacher's
gen_dataset.py) and `build_env_package` (generated data as a package).

Every step that imports verifiers or the env runs in the env's interpreter through
`taskset_probe.run_in_env_python` (stack/env_python.py picks it); only descriptions, scores and
hashes come back.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .verifiers_classic import parser_round_trip_loop
from .taskset_probe import check_taskset_ids, probe_taskset, run_in_env_python
from .verifiers_v1 import API

__all__ = ["API", "describe_env", "check_canonical_ids", "real_env", "round_trip_gate", "eval_ngrams", "eval_ngrams_key", "generator_skeleton", "build_env_package"]


def has_classic_side(env_module: str, python: str | None = None) -> bool:
    """True when the env module also defines `load_environment` (as selfimprove_arith does beside its v1 wrapper)."""
    from .detect import _source

    text = _source(env_module, python)
    return text is None or bool(re.search(r"^def\s+load_environment\s*\(", text, re.M))


def describe_env(env_id: str, env_args: dict[str, Any], *, timeout: float, python: str | None = None,
                 evaluated_examples: int = -1) -> tuple[str, dict[str, Any], dict | None]:
    """(hub_env.json `api`, its classic-shaped fields, its `taskset` section) for the run's env.

    The Taskset is probed first (a bad one is refused before any slower load). An env that also has
    a classic `load_environment` keeps the classic probe's fields; a Taskset-only env gets every field
    the loop and the teacher read from the Taskset itself (eval tasks: counted only)."""
    from . import verifiers_classic as vc

    module = vc.env_module_name(env_id)
    taskset = probe_taskset(module, env_args, python, timeout, evaluated_examples=evaluated_examples)
    samples, version = taskset.pop("train_samples"), taskset.pop("verifiers_version")
    answer_lengths = taskset.pop("train_answer_chars", None)
    sealed_ids = taskset.pop("evaluated_example_ids", None)
    if has_classic_side(module, python):
        return API, vc.introspect_env(env_id, env_args, timeout=timeout, python=python,
                                      evaluated_examples=evaluated_examples), taskset
    parsers = taskset["answer_extraction"]["parsers"]
    parser = parsers[0] if parsers else {}
    warnings = [] if taskset["eval_rows"] is not None else [
        f"the taskset has no eval split ({taskset['eval_rows_from']}): arms are scored on its first train tasks"]
    info = {
        "module": module,
        "env_class": taskset["taskset_class"],
        "parser_class": parser.get("class") or "none",  # a v1 reward reads the reply itself; the module may hold no parser
        "parser_config": {k: v for k, v in parser.items() if k in ("fields", "answer_field", "module")},
        "rubric_class": taskset["task_class"],
        "rubric_funcs": taskset["rewards"],
        "rubric_group": None,
        "system_prompt": taskset["system_prompt"],
        "answer_format_instruction": vc.answer_format_sentence(taskset["system_prompt"]),
        "train_size": taskset["train_rows"],
        "eval_size": taskset["eval_rows"],
        "train_samples": samples,
        "train_answer_chars": answer_lengths,
        "evaluated_example_ids": sealed_ids,
        "warnings": warnings,
        "verifiers_version": version,
    }
    return API, info, taskset


def real_env(hub, split: str) -> tuple[str, dict]:
    """(taskset id, taskset config fields) of the real env's train or eval rows, from hub_env.json."""
    if not hub.taskset:
        raise ConfigError("hub_env.json has no 'taskset' section (introspected under the seed dialect); "
                          "re-run `selfimprove introspect` for this --stack v1 run")
    return hub.taskset["taskset_id"], dict(hub.taskset["eval_args" if split == "eval" else "train_args"])


def round_trip_gate(hub, rows: list[dict], python: str | None = None):
    """The round trip of generated rows in v1: the hub Task's own rewards, run on each row's
    `info.reasoning` as the reply against a task holding the row's answer, must give full marks
    (gates/roundtrip.py::check_reward_round_trip). Scored in the env's interpreter."""
    from ..gates.roundtrip import check_reward_round_trip, round_trip_inputs

    taskset_id, args = real_env(hub, "train")
    usable = round_trip_inputs(rows)
    request = {"op": "round_trip", "taskset_id": taskset_id, "args": args,
               "answer_field": hub.taskset.get("answer_field") or "answer", "rows": [r for r in usable if r]}
    scored = run_in_env_python(request, f"the round trip through taskset '{taskset_id}'", python) if request["rows"] else {
        "weights": {r["name"]: r["weight"] for r in hub.taskset["rewards"]}, "rows": []}
    results = iter(scored["rows"])
    return check_reward_round_trip(rows, [next(results) if r else None for r in usable], scored["weights"])


def _eval_rows(hub, eval_examples: int) -> tuple[str, dict, int | None, str]:
    """(taskset id, config, how many tasks, source) of what every arm is scored on: the whole eval split,
    or, when the taskset has none (eval args = train args), its first `eval_examples` tasks."""
    taskset_id, args = real_env(hub, "eval")
    if args != real_env(hub, "train")[1]:
        return taskset_id, args, None, "eval_split"
    return taskset_id, args, eval_examples, "train_fallback"


def eval_ngrams_key(hub, eval_examples: int) -> dict[str, Any]:
    """What `eval_ngrams` depends on: a cached index is reused while this is unchanged."""
    taskset_id, args, limit, _ = _eval_rows(hub, eval_examples)
    return {"api": API, "taskset_id": taskset_id, "args": args, "limit": limit}


def eval_ngrams(hub, eval_examples: int, python: str | None = None):
    """The n-gram hash index of the prompts every arm is scored on, hashed in the env's interpreter
    (the same hashing as the classic questions'): no eval text leaves it."""
    from ..gates import ngram_hash

    taskset_id, args, limit, source = _eval_rows(hub, eval_examples)
    request = {"op": "eval_ngrams", "taskset_id": taskset_id, "args": args, "limit": limit,
               "hasher_file": ngram_hash.__file__, "source": source}
    data = run_in_env_python(request, f"hashing the eval prompts of taskset '{taskset_id}'", python)
    return ngram_hash.EvalNgramIndex.from_json(data)


def generator_skeleton(hub) -> dict[str, str]:
    """The gen_dataset.py skeleton's real-env lines: the taskset module, and a round-trip assert through
    the parser object its rewards read replies with (when it holds one; the gate scores every row anyway)."""
    taskset_id = hub.taskset["taskset_id"]
    parsers = hub.taskset["answer_extraction"]["parsers"]
    setup = f"import importlib\n\nREAL_TASKSET = importlib.import_module({taskset_id!r})  # the real env's verifiers v1 Taskset module"
    if not parsers:
        check = ("    # Round trip: the dataset gate scores every row's info.reasoning with the real Task's own rewards\n"
                 "    # (full marks required); this taskset holds no parser object to check it with here.")
        return {"real_env_setup": setup, "round_trip_check": check}
    setup += f"\nREAL_PARSER = REAL_TASKSET.{parsers[0]['attr']}  # what its rewards read the reply with"
    check = ("    # Round trip: the real taskset's parser must extract each answer from its reasoning\n"
             "    # (the dataset gate then scores it with the real Task's rewards: full marks required).\n"
             + parser_round_trip_loop("REAL_PARSER"))
    return {"real_env_setup": setup, "round_trip_check": check}


def build_env_package(project_dir: Path, package: str, dataset: Path, *, hub, origin: str,
                      rewards_file: Path | None, rewards: list[tuple[str, float]], provenance: dict) -> Path:
    """A v1 Taskset package over dataset.jsonl using the hub taskset's Task class by reference."""
    from .env_package import build_taskset_package

    if rewards:  # a v1 task's rewards are its methods; plugging extra ones via TaskConfig is not wired yet
        raise ConfigError(f"custom_rewards ({', '.join(n for n, _ in rewards)}): not supported for a verifiers v1 "
                          f"taskset yet; drop them from the weakness report (the hub task's own rewards train)")
    ts = real_env(hub, "train")
    return build_taskset_package(project_dir, package, dataset, hub_module=ts[0], hub_args=ts[1],
                                 answer_field=hub.taskset.get("answer_field") or "answer", origin=origin,
                                 provenance=provenance)


def check_canonical_ids(dialect, dataset: str, canonical_config: str | None, python: str | None = None) -> None:
    """The taskset ids of the canonical config the baseline will find (run.json canonical_config, else the
    dataset's configs/basic/<dataset>/rl.toml), resolved now with verifiers' loader in the env's interpreter:
    prime-rl imports them while its config validates, so an id it cannot load would fail the first job.
    ConfigError naming the file, the field, the id and the fix. No canonical config found: nothing to check
    (the baseline then writes one from hub_env.json, whose id describe_env has just resolved)."""
    from ..resources import project_configs_dirs

    found, _ = dialect.find_canonical_config(dataset, canonical_config, None, project_configs_dirs())
    if found is None:
        return
    canonical = dialect.read_toml(found)
    uses = []
    for group in ("train", "eval"):
        sources = ((canonical.get("orchestrator") or {}).get(group) or {}).get("source") or []
        for i, source in enumerate(sources if isinstance(sources, list) else []):
            taskset_id = ((source.get("env") or {}).get("taskset") or {}).get("id") if isinstance(source, dict) else None
            if isinstance(taskset_id, str):
                uses.append((taskset_id, f"canonical config {found}: orchestrator.{group}.source[{i}].env.taskset.id"))
    check_taskset_ids(uses, python)
