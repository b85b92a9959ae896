"""The seed dialect of verifiers: the classic API (0.3.x `verifiers.legacy`, or the
package root before 0.3). Everything that knows verifiers' names lives here.

Environments are never loaded in this process. Each question goes to a FRESH
interpreter running `_env_probe.py` (by path, so it may be another venv's Python,
e.g. the training engine's, without selfimprove installed), so a stale import or
an install made after this process started can't change the answer. Every call
takes `python=` (default: this interpreter):

    is_importable("primeintellect/gsm8k")                  -> bool
    introspect_env("selfimprove-arith", {})                -> dict (the stack, sizes, 3 TRAIN rows)
    run_parser_over("selfimprove-arith", {}, ["<answer>4</answer>"])  -> ["4"]
    install_editable(Path("envs/my_env"))                  # pip install -e, into this interpreter

What is not covered: environments that need a model server or credentials to
*load* (JudgeRubric clients are built lazily, so most load fine). The v1 API of
verifiers (a Taskset) is env_api_v1.py / verifiers_v1.py, beside this module.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from ..engines import procs
from ..errors import EnvNotFound, SelfImproveError

PROBE_FILE = Path(__file__).with_name("_env_probe.py")
INTROSPECT_TIMEOUT_S = 900  # loading an env may download its dataset
PARSE_TIMEOUT_S = 300
IMPORT_CHECK_TIMEOUT_S = 60
INSTALL_TIMEOUT_S = 1800
N_TRAIN_SAMPLES = 3

THINK_STRIPPING_PARSERS = ("ThinkParser",)  # return "" unless the text has </think>


class EnvLoadError(SelfImproveError):
    """The environment's module imports, but load_environment or its datasets fail."""


# ---------------------------------------------------------------- names


def env_module_name(env_id: str) -> str:
    """verifiers' rule (`load_environment`): the last path segment, dashes to underscores."""
    return env_id.replace("-", "_").split("/")[-1]


def is_hub_slug(env_id: str) -> bool:
    """True for a Prime hub id `owner/name` (an optional `@version` is allowed)."""
    return re.fullmatch(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(@[\w.+-]+)?", env_id) is not None


def install_hint(env_id: str, python: str | None = None) -> str:
    hub = env_id if is_hub_slug(env_id) else "<owner>/<name>"
    return (
        f"install it into {python or sys.executable} with `pip install -e <env project dir>` "
        f"or `prime env install {hub}`, or re-run with --env-path DIR"
    )


# ---------------------------------------------------------------- subprocess plumbing


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _probe(request: dict[str, Any], timeout: float, python: str | None) -> dict[str, Any]:
    """Run the probe in a fresh interpreter; return its `result` or raise a one-line error."""
    env_id = request["env_id"]
    python = python or sys.executable
    try:
        proc = procs.run_child(
            [python, str(PROBE_FILE)],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_child_env(),
        )
    except subprocess.TimeoutExpired:
        raise EnvLoadError(f"loading env '{env_id}' took longer than {timeout:.0f} s; is it downloading a large dataset?") from None
    except OSError as e:
        raise SelfImproveError(f"cannot run {python}: {e.strerror}") from None
    reply = None
    for line in reversed(proc.stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                reply = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
    if not isinstance(reply, dict):
        tail = _last_line(proc.stderr) or "no output"
        raise EnvLoadError(f"the probe of env '{env_id}' crashed (exit {proc.returncode}): {tail}")
    if reply.get("ok"):
        return reply["result"]
    kind, message = reply.get("kind"), reply.get("message", "unknown error")
    if kind == "not_importable":
        raise EnvNotFound(f"env '{env_id}' is not importable: {message} in {python}; {install_hint(env_id, python)}")
    raise EnvLoadError(message)


# ---------------------------------------------------------------- public API


def is_importable(env_id: str, python: str | None = None) -> bool:
    """Whether a fresh interpreter finds the env's module (found, not imported; the
    current directory does not count, as for the probe)."""
    module = env_module_name(env_id)
    code = (
        "import importlib.util, os, sys; sys.path[:] = [p for p in sys.path if p not in ('', os.getcwd())]; "
        "sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 1)"
    )
    try:
        proc = procs.run_child(
            [python or sys.executable, "-c", code, module],
            capture_output=True,
            text=True,
            timeout=IMPORT_CHECK_TIMEOUT_S,
            env=_child_env(),
        )
    except (subprocess.TimeoutExpired, OSError):
        return False
    return proc.returncode == 0


def introspect_env(
    env_id: str, env_args: dict[str, Any] | None = None, timeout: float = INTROSPECT_TIMEOUT_S,
    n_samples: int = N_TRAIN_SAMPLES, python: str | None = None, evaluated_examples: int = -1,
) -> dict[str, Any]:
    """Load the env in a fresh interpreter and describe its stack.

    Returns a dict with env_class, parser_class, parser_config, rubric_class (a
    RubricGroup unwrapped), rubric_funcs [{name, weight}], rubric_group (members, or
    None), system_prompt, answer_format_instruction, train_size, eval_size (None when
    the env has no eval split), train_samples (n TRAIN rows; never eval rows),
    warnings, verifiers_version, module, module_file, and evaluated_example_ids: when the env has no
    eval split, the ids of the first `evaluated_examples` train rows, which the engine evaluates (the
    samples are drawn from the other rows), else None.
    """
    info = _probe(
        {"op": "introspect", "env_id": env_id, "env_args": env_args or {}, "n_samples": n_samples,
         "evaluated_examples": evaluated_examples}, timeout, python
    )
    info["answer_format_instruction"] = answer_format_sentence(info.get("system_prompt"))
    return info


def run_parser_over(
    env_id: str, env_args: dict[str, Any] | None, texts: list[str], timeout: float = PARSE_TIMEOUT_S,
    python: str | None = None,
) -> list[str | None]:
    """The env's own parser applied to each text (as the last assistant message of a
    completion, which is how its rubric sees it), in ONE fresh interpreter.

    An answer is None when the parser finds nothing or raises.
    """
    if not texts:
        return []
    request = {"op": "parse", "env_id": env_id, "env_args": env_args or {}, "texts": list(texts)}
    result = _probe(request, timeout, python)
    return result["answers"]


def eval_question_ngrams(
    env_id: str, env_args: dict[str, Any] | None, timeout: float = PARSE_TIMEOUT_S, python: str | None = None,
    fallback_examples: int = -1,
):
    """The questions the engine evaluates as an n-gram hash index (gates.ngram_hash), computed in a
    fresh interpreter: the decontamination gate compares against hashes and never sees eval text.

    The eval split; or, when the env has none, the first `fallback_examples` train rows, which is
    what verifiers' get_eval_dataset(n) falls back to (the index's `source` says which)."""
    from ..gates import ngram_hash

    request = {"op": "eval_ngrams", "env_id": env_id, "env_args": env_args or {}, "hasher_file": ngram_hash.__file__,
               "fallback_examples": fallback_examples}
    return ngram_hash.EvalNgramIndex.from_json(_probe(request, timeout, python))


def parser_strips_think(parser_class: str, parser_config: dict[str, Any] | None = None) -> bool:
    """True when the parser (or a base of it) is one that drops text without </think>."""
    names = [parser_class, *((parser_config or {}).get("bases") or [])]
    return any(n in THINK_STRIPPING_PARSERS for n in names)


def parser_requires_think_field(parser_config: dict[str, Any] | None) -> bool:
    """True for an XMLParser whose fields include `think` (verifiers warns against it for Qwen3)."""
    fields = (parser_config or {}).get("fields") or []
    flat = [f for item in fields for f in (item if isinstance(item, list) else [item])]
    return "think" in flat


# ---------------------------------------------------------------- answer-format sentence

_STRONG = re.compile(r"</?[A-Za-z_][\w-]*>|\\boxed|\bboxed\b|\bformat(?:ted)?\b|\btags?\b|\bxml\b", re.I)
_WEAK = re.compile(r"\banswer\b|\brespond\b|\breply\b|\benclose\b|\bwrap\b|\bfinal\b|\bonly\b|####", re.I)


def _sentences(text: str) -> list[str]:
    """Split a prompt into sentences. A line ending in ':' keeps the block that follows
    (e.g. 'Respond in the following format:' + the tag skeleton)."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    merged: list[str] = []
    for p in paragraphs:
        if merged and merged[-1].rstrip().endswith(":"):
            merged[-1] = merged[-1] + "\n" + p
        else:
            merged.append(p)
    out: list[str] = []
    for p in merged:
        # split after . ! ? that end a word (not '...' of a skeleton), before a capital, '<' or '\'
        parts = re.split(r"(?<=[^.\s][.!?])\s+(?=[A-Z<\\\"'(])", p)
        out.extend(s.strip() for s in parts if s.strip())
    return out


def answer_format_sentence(system_prompt: str | None) -> str | None:
    """The sentence of the system prompt that states the answer format, or None.

    Heuristic: the sentence with the most format cues (a `<tag>`, boxed, 'format',
    'tags' count double; 'answer', 'respond', 'reply', ... once); the earliest wins a tie.
    """
    if not system_prompt or not system_prompt.strip():
        return None
    best, best_score = None, 0
    for sentence in _sentences(system_prompt):
        score = 2 * len(_STRONG.findall(sentence)) + len(_WEAK.findall(sentence))
        if score > best_score:
            best, best_score = sentence, score
    return best


# ---------------------------------------------------------------- installing a local env project


def _build_requirements_importable(project: Path, python: str) -> bool:
    try:
        data = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return False
    requires = data.get("build-system", {}).get("requires") or ["setuptools"]
    for req in requires:
        name = re.split(r"[\s<>=!~;\[]", req.strip(), maxsplit=1)[0]
        if not name or not _has_module(python, name.replace("-", "_").lower()):
            return False
    return True


def _has_module(python: str, module: str) -> bool:
    if python == sys.executable:
        return find_spec(module) is not None
    code = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 1)"
    try:
        return procs.run_child([python, "-c", code, module], capture_output=True, timeout=IMPORT_CHECK_TIMEOUT_S).returncode == 0
    except (subprocess.TimeoutExpired, OSError):
        return False


def _installer(python: str, no_build_isolation: bool) -> list[str]:
    """pip of `python` when it has one, else `uv pip --python` (uv venvs often lack pip)."""
    if _has_module(python, "pip"):
        cmd = [python, "-m", "pip", "install", "-q"]
    elif shutil.which("uv"):
        cmd = [shutil.which("uv") or "uv", "pip", "install", "-q", "--python", python]
    else:
        raise SelfImproveError(f"neither pip nor uv is available for {python}; install pip into it")
    return cmd + (["--no-build-isolation"] if no_build_isolation else [])


def _pip_error(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.lower().startswith("error") or "Error:" in ln:
            return ln
    return lines[-1] if lines else "no output"


def install_editable(project: Path, timeout: float = INSTALL_TIMEOUT_S, python: str | None = None) -> list[str]:
    """`pip install -e project` into `python` (default: this one); returns the command that worked.

    When the project's build requirements are already importable here, try without
    build isolation first (works offline, and in a second rather than ten); if that
    fails (e.g. hatchling needs `editables`), retry with isolation.
    """
    project = Path(project).resolve()
    if not (project / "pyproject.toml").is_file() and not (project / "setup.py").is_file():
        raise SelfImproveError(f"--env-path {project}: no pyproject.toml or setup.py; point it at an environment project")
    python = python or sys.executable
    attempts = [True, False] if _build_requirements_importable(project, python) else [False]
    err = ""
    for no_iso in attempts:
        cmd = _installer(python, no_iso) + ["-e", str(project)]
        try:
            proc = procs.run_child(cmd, capture_output=True, text=True, timeout=timeout, env=_child_env())
        except subprocess.TimeoutExpired:
            raise SelfImproveError(f"`pip install -e {project}` took longer than {timeout:.0f} s") from None
        if proc.returncode == 0:
            return cmd
        err = _pip_error(proc.stderr or proc.stdout)
    raise SelfImproveError(f"`pip install -e {project}` failed: {err}")


def parse_answers(
    hub_env: Any, texts: list[str], timeout: float = PARSE_TIMEOUT_S, python: str | None = None
) -> list[str | None]:
    """`run_parser_over` for the env recorded in hub_env.json (a `models.HubEnv`)."""
    return run_parser_over(hub_env.env_id, hub_env.env_args, texts, timeout=timeout, python=python)


# ---------------------------------------------------------------- what the phases ask of the env API
# (the same names in env_api_v1; a dialect module carries one of the two as `env_api`)

API = "verifiers.classic"


def describe_env(env_id: str, env_args: dict[str, Any], *, timeout: float, python: str | None = None,
                 evaluated_examples: int = -1) -> tuple[str, dict[str, Any], dict | None]:
    """(hub_env.json `api`, its classic fields, extra section): the classic probe's fields, nothing more.
    `evaluated_examples`: how many first train rows the engine evaluates when the env has no eval split."""
    return API, introspect_env(env_id, env_args, timeout=timeout, python=python,
                               evaluated_examples=evaluated_examples), None


def check_canonical_ids(dialect, dataset: str, canonical_config: str | None, python: str | None = None) -> None:
    """Nothing to resolve: a classic env's id is the one the probe has just loaded with load_environment
    (the v1 API resolves its canonical config's taskset ids here, env_api_v1.check_canonical_ids)."""


def real_env(hub, split: str) -> tuple[str, dict]:
    """(env id, env args) of the real env: load_environment picks the split itself."""
    return hub.env_id, dict(hub.env_args)


def round_trip_gate(hub, rows: list[dict], python: str | None = None):
    """The round trip of generated rows: the hub env's parser over each row's `info.reasoning`
    must extract the row's answer (gates/roundtrip.py::check_round_trip), in the env's interpreter."""
    from ..gates.roundtrip import check_round_trip

    reasoning = [str((r.get("info") or {}).get("reasoning", "")) if isinstance(r, dict) else "" for r in rows]
    parsed = run_parser_over(hub.env_id, hub.env_args, reasoning, python=python)
    return check_round_trip(rows, dict(zip(reasoning, parsed)).get)


def eval_ngrams_key(hub, eval_examples: int) -> dict[str, Any]:
    """What `eval_ngrams` depends on: a cached index is reused while this is unchanged."""
    return {"env_id": hub.env_id, "env_args": hub.env_args, "fallback_examples": eval_examples}


def eval_ngrams(hub, eval_examples: int, python: str | None = None):
    """The n-gram hash index of the questions every arm is scored on (`eval_question_ngrams`)."""
    return eval_question_ngrams(hub.env_id, hub.env_args, fallback_examples=eval_examples, python=python)


def generator_skeleton(hub) -> dict[str, str]:
    """The gen_dataset.py skeleton's real-env lines: load_environment, and a round-trip assert through its parser."""
    setup = ("import verifiers as vf\n\n"
             f"REAL_ENV = vf.load_environment({hub.env_id!r}, **{hub.env_args!r})")
    check = ("    # Round trip: the real env's parser must extract each answer from its reasoning.\n"
             + parser_round_trip_loop("REAL_ENV.parser"))
    return {"real_env_setup": setup, "round_trip_check": check}


def parser_round_trip_loop(parser: str) -> str:
    """The skeleton's round-trip assert through the parser object named by `parser` (both env APIs use it).
    It passes the reasoning as one assistant message, exactly as the dataset gate does."""
    return ("    for row in rows:\n"
            f"        got = {parser}.parse_answer([{{\"role\": \"assistant\", \"content\": row[\"info\"][\"reasoning\"]}}])\n"
            "        assert got is not None and got.strip() == row[\"answer\"].strip(), (row[\"info\"][\"sub_domain\"], got)")


def build_env_package(project_dir: Path, package: str, dataset: Path, *, hub, origin: str,
                      rewards_file: Path | None, rewards: list[tuple[str, float]], provenance: dict) -> Path:
    from .env_package import build_package

    return build_package(project_dir, package, dataset, hub_env_id=hub.env_id, hub_env_args=hub.env_args,
                         origin=origin, rewards_file=rewards_file, rewards=rewards, provenance=provenance)
