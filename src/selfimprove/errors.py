"""One shallow exception tree. Every expected failure is a SelfImproveError whose
message is a single line meant for the user (what, where, how to fix); the CLI
prints it and exits with `exit_code`, no traceback."""

from __future__ import annotations


class SelfImproveError(Exception):
    """An expected failure, displayed to the user as one line."""

    exit_code = 1


class UsageError(SelfImproveError):
    """Bad flags or arguments (exit 2, like a Typer usage error)."""

    exit_code = 2


class RunDirError(SelfImproveError):
    """The run directory is missing, corrupt or malformed."""


class RunDirLocked(RunDirError):
    """Another selfimprove command holds the run directory's lock."""

    exit_code = 75  # EX_TEMPFAIL: retry when the holder is done


class HubUnreachable(SelfImproveError):
    """The environment hub could not be reached; retry later (the run is not aborted)."""

    exit_code = 75


class EnvNotFound(SelfImproveError):
    """The environment does not exist on the hub or cannot be imported."""


class ConfigError(SelfImproveError):
    """A TOML config the tool reads or writes breaks the engine's schema."""


class BuildRefused(ConfigError):
    """The generic student recipe cannot serve this env (rl/student_build.py); the message says why and what would."""


class JobFailed(SelfImproveError):
    """A training job exited without its final artefacts."""


class JobLive(SelfImproveError):
    """The scheduler still holds the arm's job: --restart/--resume would start a second one into its output."""

    exit_code = 75  # EX_TEMPFAIL: retry once the job has ended (or after scancel)


class EvalAggregationError(SelfImproveError):
    """Eval rollouts are missing, empty or lack numeric fields."""


class EvalParseError(EvalAggregationError):
    """The final eval file is missing, empty or does not parse (iter_0 / iter_N: the run is aborted)."""


class TeacherUnreachable(SelfImproveError):
    """The LLM teacher's API could not be reached after its retries (timeouts, 429, 5xx, refused
    connections); nothing of the attempt was written, so re-running later resumes (retry later)."""

    exit_code = 75


class TeacherActionNeeded(SelfImproveError):
    """The iteration waits for the teacher to write or fix a file."""

    exit_code = 3


class TeacherError(SelfImproveError):
    """The unattended teacher (`selfimprove run --teacher`) failed to load or raised in write()."""


class GateFailed(SelfImproveError):
    """A teacher file or the generated dataset failed a gate; the report lists every failure."""

    exit_code = 4


class NoLearningSignal(SelfImproveError):
    """iter_0's rewards do not spread: GRPO has nothing to learn from (baseline --allow-no-signal continues).

    Exit 4, like a failed gate: it is one (a learnability gate), but it is not the teacher's to fix,
    so it is not a GateFailed (the unattended loop would hand it to the teacher)."""

    exit_code = 4


class PhaseOrderError(SelfImproveError):
    """A phase was called before the phase it needs, or on a run that is already closed (nothing changed)."""

    exit_code = 5


class Phase4Incomplete(SelfImproveError):
    """The summary lacks a Phase 4 arm (its job died or never ran); the message names it and the fix."""

    exit_code = 6
