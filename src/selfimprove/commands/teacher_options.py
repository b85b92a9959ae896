"""The --teacher flags of `run` and `iterate`: a spec string, and the built-in LLM teacher's API flags."""

from __future__ import annotations

import shlex
from typing import Annotated, Any, Callable, Optional

import typer

from ..errors import RunDirError, UsageError
from ..llm_teacher import SPEC_PREFIX, ApiSettings, LlmTeacher
from ..llm_teacher.api import DEFAULT_INPUT_CHARS, OPENAI_URL
from ..teacher import TeacherContext, load_teacher

TeacherBaseUrlOpt = Annotated[str, typer.Option(
    envvar=["SELFIMPROVE_TEACHER_BASE_URL", "OPENAI_BASE_URL"],
    help="--teacher llm:MODEL: the OpenAI-compatible API's base URL, e.g. http://localhost:8000/v1 for a local vLLM.")]
TeacherKeyEnvOpt = Annotated[str, typer.Option(
    envvar="SELFIMPROVE_TEACHER_API_KEY_ENV",
    help="--teacher llm:MODEL: the NAME of the environment variable holding the API key (never the key). Needed "
         "for the default URL only; a local server without one gets 'unused'.")]
TeacherMaxTokensOpt = Annotated[Optional[int], typer.Option(
    min=1, help="--teacher llm:MODEL: tokens (prompt + completion) one iteration may spend; no request is sent "
                "past it (exit 1: raise it and re-run). Default: no cap.")]
TeacherMaxReplyTokensOpt = Annotated[Optional[int], typer.Option(
    min=1, help="--teacher llm:MODEL: completion tokens one reply may use (sent as max_completion_tokens). Default: "
                "the server's own limit.")]
TeacherInputCharsOpt = Annotated[int, typer.Option(
    min=50_000, help=f"--teacher llm:MODEL: characters of the opening request, the skill's instructions included "
                     f"(default {DEFAULT_INPUT_CHARS:,}: ~15k tokens, within a 32k-context local model with room for "
                     "the reply). The weakness summary is always whole (groups capped by class order only past half "
                     "the inputs, with a count); failures and the scratchpad fill the rest, whole rows, with a count.")]
TeacherTimeoutOpt = Annotated[float, typer.Option(min=1, help="--teacher llm:MODEL: seconds per request.")]
TeacherRetriesOpt = Annotated[int, typer.Option(
    min=0, max=20, help="--teacher llm:MODEL: retries with backoff on timeouts, refused connections, 429 and 5xx; "
                        "then exit 75 (retry later, nothing written).")]

# The parameter names of the flags above: given with a non-LLM teacher, they are refused.
LLM_FLAGS = ("teacher_base_url", "teacher_api_key_env", "teacher_max_tokens", "teacher_max_reply_tokens",
             "teacher_timeout", "teacher_retries", "teacher_input_chars")


def make_teacher(spec: str, ctx: typer.Context, llm: dict[str, Any]) -> Callable[[TeacherContext], None]:
    """`llm:MODEL` -> the built-in LLM teacher, configured by `llm` (the LLM_FLAGS' values by
    parameter name); anything else -> load_teacher (MODULE:OBJECT, file.py:OBJECT)."""
    if spec.startswith(SPEC_PREFIX):
        base_url, api_key_env = llm["teacher_base_url"], llm["teacher_api_key_env"]
        model = spec[len(SPEC_PREFIX):].strip()
        if not model:
            raise UsageError(f"--teacher '{spec}': name the model after llm:, e.g. llm:gpt-4.1 or llm:Qwen/Qwen3-32B")
        if not api_key_env.strip() or "=" in api_key_env or " " in api_key_env:
            raise UsageError("--teacher-api-key-env: give the NAME of the variable that holds the key "
                             "(e.g. OPENAI_API_KEY), never the key itself")
        base_url = base_url.strip() or OPENAI_URL  # an empty OPENAI_BASE_URL means the default, as for the SDK
        if not base_url.startswith(("http://", "https://")):
            raise UsageError(f"--teacher-base-url '{base_url}': not an http(s) URL; give the API's base, e.g. "
                             "http://localhost:8000/v1")
        settings = ApiSettings(model=model, base_url=base_url, api_key_env=api_key_env,
                               timeout_s=llm["teacher_timeout"], retries=llm["teacher_retries"],
                               max_tokens=llm["teacher_max_tokens"], max_reply_tokens=llm["teacher_max_reply_tokens"],
                               input_chars=llm.get("teacher_input_chars") or DEFAULT_INPUT_CHARS)
        settings.key()  # a missing key fails here, before bootstrap or any phase has run
        return LlmTeacher(settings).write
    refuse_llm_flags(ctx, f"not for '{spec}'")
    return load_teacher(spec)


def llm_values(ctx: typer.Context) -> dict[str, Any]:
    """The LLM_FLAGS' values of this command line (typed or default), by parameter name."""
    return {name: ctx.params[name] for name in LLM_FLAGS}


def _given(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def teacher_record(spec: str, llm_values: dict[str, Any]) -> dict[str, Any]:
    """What run.json `teacher` keeps of this --teacher: the spec, and for llm:MODEL its flags (no key)."""
    return {"spec": spec, "settings": dict(llm_values) if spec.startswith(SPEC_PREFIX) else {}}


def recorded_teacher(ctx: typer.Context, recorded: dict[str, Any] | None,
                     llm_values: dict[str, Any], source: str = "run.json") -> tuple[str | None, dict[str, Any]]:
    """`run --run-dir R` without --teacher: run.json's teacher, its recorded LLM flags under the ones
    typed on this command line. (None, llm_values) when the run recorded none."""
    if not recorded or not isinstance(recorded.get("spec"), str):
        return None, llm_values
    saved = recorded.get("settings") or {}
    if not isinstance(saved, dict):
        raise RunDirError(f"{source}: teacher.settings = {repr(saved)[:60]}: must be an object of --teacher-* flags; "
                          f"re-run with --teacher {recorded['spec']} (its settings are recorded again), or fix that file")
    for name, value in saved.items():
        if not _given(ctx, name) and (why := _bad_recorded(name, value)):
            flag = f"--{name.replace('_', '-')}"
            raise RunDirError(f"{source}: teacher.settings.{name} = {repr(value)[:60]}: {why}; re-run with "
                              f"--teacher {recorded['spec']} {flag} VALUE (recorded in its place), or fix that file")
    return recorded["spec"], {name: (saved[name] if name in saved and not _given(ctx, name) else value)
                              for name, value in llm_values.items()}


# What each recorded LLM flag may hold: the flag's own type and range (a hand-edited or forged run.json
# held -5 input characters, or a timeout of "abc" that failed inside the SDK as if the teacher were wrong).
_RECORDED = {"teacher_base_url": (str, None, None), "teacher_api_key_env": (str, None, None),
             "teacher_max_tokens": (int, 1, None), "teacher_max_reply_tokens": (int, 1, None),
             "teacher_timeout": (float, 1, None), "teacher_retries": (int, 0, 20),
             "teacher_input_chars": (int, 50_000, None)}


def _bad_recorded(name: str, value: Any) -> str | None:
    """Why a recorded setting cannot be used, or None."""
    if name not in _RECORDED:
        return None  # a key this version does not read (never used)
    kind, low, high = _RECORDED[name]
    if value is None and name in ("teacher_max_tokens", "teacher_max_reply_tokens"):
        return None  # no cap
    ok_type = isinstance(value, str) if kind is str else (
        isinstance(value, (int, float)) and not isinstance(value, bool) and (kind is float or isinstance(value, int)))
    if not ok_type:
        return f"must be {'a string' if kind is str else 'an integer' if kind is int else 'a number'}"
    if (low is not None and not value >= low) or (high is not None and value > high):
        return f"must be {'>= ' + str(low) if high is None else f'{low}..{high}'}"
    return None


def teacher_flags(ctx: typer.Context, spec: str) -> str:
    """`--teacher SPEC` and the LLM flags typed on this command line, shell-quoted: the part of a
    command to re-run that makes it call the same teacher the same way."""
    parts = ["--teacher", spec]
    for name in LLM_FLAGS:
        if _given(ctx, name):
            parts += [f"--{name.replace('_', '-')}", str(ctx.params[name])]
    return shlex.join(parts)


def refuse_llm_flags(ctx: typer.Context, why: str) -> None:
    """An LLM teacher flag typed on a command that calls no LLM teacher is a mistake, not a no-op."""
    given = [f"--{name.replace('_', '-')}" for name in LLM_FLAGS if _given(ctx, name)]
    if given:
        raise UsageError(f"{', '.join(given)}: for --teacher llm:MODEL only, {why}; drop them")
