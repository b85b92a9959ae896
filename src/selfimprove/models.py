"""Pydantic schemas of every JSON file in a run directory.

Each file kind has a model with `schema_version` first and `extra="forbid"`, so
a typo or a file from a newer tool fails loudly with the field named. Readers
and writers live in `rundir.py`. Don't reorder or rename fields without bumping
SCHEMA_VERSION and adding an upgrade step in `_upgrade`.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SCHEMA_VERSION = 1

# How a run ended: Phase 3's gates (budget_exhausted, max_iters_reached), finalize before they
# fired (completed), or an error (aborted).
EndReason = Literal["completed", "budget_exhausted", "max_iters_reached", "aborted"]
# run.json status: "running" until it ends, then its EndReason, then "finalized" once finalize has
# closed it (the EndReason moves to run.json end_reason so it is not lost).
RunStatus = Literal["running", "completed", "budget_exhausted", "max_iters_reached", "aborted", "finalized"]
EngineName = Literal["prime-rl", "local"]

# The skill's procedure's pinned hyperparameters (overridable only by explicit flags, recorded in run.json).
SEED_STEPS_PER_RUN = 100
SEED_ROLLOUTS_PER_EXAMPLE = 16
SEED_EVAL_EXAMPLES = 200
MIN_UNIQUE_PROMPTS_PER_STEP = 16  # below this GRPO collapses (the floor of the skill's procedure)

# Upper bounds of compare/run --seeds and --parallel. Each seed is a full training run of three arms,
# so 32 seeds already cost ~100 training runs; far past any useful seed-variance estimate. Checked
# where the flag enters (before run.json is written) and when run.json is read back.
MAX_SEEDS = 32
MAX_PARALLEL = 16  # arms trained at once; each is a whole engine job
# How far in the future a recorded timestamp may lie (clock differences between machines a run
# dir was copied across) before run.json is called damaged.
CLOCK_SLACK_S = 24 * 3600


class FileModel(BaseModel):
    """Base of every run-dir file: strict keys, a version we refuse to read if newer."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    schema_version: int = SCHEMA_VERSION

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        if isinstance(data, dict):
            version = data.get("schema_version", SCHEMA_VERSION)
            if isinstance(version, int) and version > SCHEMA_VERSION:
                raise ValueError(
                    f"schema_version {version} is newer than this selfimprove understands "
                    f"({SCHEMA_VERSION}); upgrade selfimprove"
                )
        return data


class Phase4Error(BaseModel):
    model_config = ConfigDict(extra="forbid")
    arm: str
    error: str
    ts: float


class RunConfig(FileModel):
    """run.json: what the run is (fixed at bootstrap) and where it stands (status)."""

    dataset: str  # short dataset name, used in package names (<dataset>_iter_N)
    hub_id: str  # the real environment: a hub slug owner/name, or a locally importable env id
    model: str  # student model id (HF id or local dir), used verbatim as [model] name
    start_ts: float  # unix seconds at bootstrap (the run's start; NOT the budget clock)
    budget_seconds: int = Field(gt=0)  # Phase 3 wall-clock cap, measured from phase3_start_ts; Phase 4 runs after, on its own time
    max_iters: int  # total iterations including iter_0
    batch_size: int  # TOTAL rollouts per step (unique prompts x rollouts_per_example)
    init_from: str | None = None  # prior run dir reused as iter_0 (Phase 2A), or null
    # Random hex id of this run, made at bootstrap. It is part of every generated env package
    # name (<dataset>_r<run_id>_iter_N), so two runs of one dataset never install over each
    # other's training data. null in run.json of older runs: their packages keep the plain
    # <dataset>_iter_N names, and the pre-training provenance check alone protects them.
    run_id: str | None = None
    status: RunStatus = "running"
    reason: str | None = None  # why the run ended (e.g. "hub env X not found")
    end_reason: EndReason | None = None  # status "finalized": how the run had ended (its status before finalize)
    compact_warnings: list[str] = Field(default_factory=list)
    phase4_errors: list[Phase4Error] = Field(default_factory=list)
    # The built-in LLM teacher's (`run --teacher llm:MODEL`) tokens per iteration ("iter_1": prompt +
    # completion over every request it paid for; replays of saved exchanges are free and not counted).
    teacher_tokens: dict[str, int] = Field(default_factory=dict)
    # `run --teacher` as last given: {"spec": ..., "settings": the LLM teacher's flags (URL, key VARIABLE
    # name, caps; never the key)}. `run --run-dir` without --teacher resumes with it. null: the env's default.
    teacher: dict[str, Any] | None = None
    # How prompts are grouped in the weakness statistics (grouping.py): auto | task | template | answer,
    # or path/to/file.py:FUNCTION. null = auto. Set by `bootstrap/run --group-by`, changed by `iterate --group-by`.
    group_by: str | None = None

    engine: EngineName = "prime-rl"
    engine_command: list[str] | None = None  # overrides the engine's default launcher, e.g. ["uv","run","rl"]
    # The interpreter every step that imports verifiers or the env runs in (introspection, the
    # teacher's generator, round trip, reward lint, decontamination, package install + verify):
    # prime-rl's $PRIME_RL_DIR/.venv/bin/python, or --env-python. null = selfimprove's own
    # (the local CPU engine's, and older run.json). env_python_source says how it was picked.
    env_python: str | None = None
    env_python_source: str | None = None
    env_args: dict[str, Any] = Field(default_factory=dict)  # kwargs for load_environment(hub_id, ...)
    env_path: str | None = None  # local env project installed before introspection
    canonical_config: str | None = None  # --config: the canonical rl.toml for iter_0 / Run B
    # --slurm: absolute path of the prime-rl overlay holding [slurm] (and optionally [deployment]); every
    # launch gets it as `@ FILE`, so the engine submits each arm as its own SLURM job. null = no SLURM
    # (unless the canonical config holds [slurm]: see phases/slurm_launch.py).
    slurm: str | None = None
    # The run dir's resolved path at bootstrap. A copied (or moved) run dir is elsewhere: its SLURM job
    # names then carry a tag of its own path, so a copy never names a job as the original does.
    home: str | None = None
    wandb_project: str | None = None  # when set, training configs get a [wandb] section
    # Which prime-rl / verifiers dialect the run writes and reads: "seed" (prime-rl 09e297743,
    # classic verifiers envs) or "v1" (prime-rl >= 0.8 at 559b44772, verifiers v1 Tasksets).
    # null in older run.json = seed. stack_source says how it was picked, stack_seed_note what
    # fixes a training seed in that dialect.
    stack: Literal["seed", "v1"] | None = None
    stack_source: str | None = None
    stack_seed_note: str | None = None

    steps_per_run: int = SEED_STEPS_PER_RUN  # new training steps per run (the skill's procedure: 100)
    rollouts_per_example: int = SEED_ROLLOUTS_PER_EXAMPLE  # the skill's procedure: 16
    eval_examples: int = SEED_EVAL_EXAMPLES  # eval examples per iteration (the skill's procedure: 200)
    # --max-completion-tokens: caps every arm's train and eval completion budget (phases/completion_budget.py).
    max_completion_tokens: int | None = Field(default=None, ge=1)
    # When baseline generated the canonical config from hub_env.json (no configs/<dataset>/rl.toml):
    # {"train", "eval", "rule"}, the budget that follows the env's reference answers. null otherwise.
    generated_budget: dict[str, Any] | None = None
    allow_small_batch: bool = False  # permits < 16 unique prompts per step (smoke runs only)
    seeds: int = Field(default=1, ge=1, le=MAX_SEEDS)  # Phase 4: training seeds per compared arm (compare/run --seeds; 1 = unmeasured)

    versions: dict[str, str] = Field(default_factory=dict)  # tool + library versions at bootstrap

    iter_0_source: Literal["trained", "init-from"] | None = None
    iter_0_path: str | None = None
    iter_0_step: int | None = None

    end_ts: float | None = None
    total_duration_s: float | None = None

    # unix seconds when the first `iterate` began Phase 3: the --budget clock starts here, so
    # bootstrap, introspect and baseline (with any first-use student build) are never charged.
    # Written once, never moved by re-runs or resumes; null until Phase 3 starts (and in older run.json).
    phase3_start_ts: float | None = None

    # iter_0's reward spread (phases/signal.py): has_signal, verdict, the evidence, and `allowed`
    # when the user continued with --allow-no-signal. Null until baseline checked it.
    learning_signal: dict[str, Any] | None = None

    @field_validator("start_ts", "phase3_start_ts", "end_ts")
    @classmethod
    def _not_in_future(cls, ts: float | None) -> float | None:
        """A clock set later than now (a hand-edited or damaged run.json) would show nonsense budgets."""
        if ts is not None and ts > time.time() + CLOCK_SLACK_S:
            raise ValueError(f"timestamp {ts} is in the future; set it to a past unix time or restore run.json")
        return ts

    def ended_as(self) -> str:
        """How the run ended, whether or not finalize has closed it: its status, or end_reason once finalized."""
        return (self.end_reason or "completed") if self.status == "finalized" else self.status

    def finalized(self) -> bool:
        """finalize has closed the run. An aborted run has end_ts (introspect sets it) but no summary yet;
        a run closed by an older selfimprove kept its end reason as status, with end_ts set."""
        return self.status == "finalized" or (self.end_ts is not None and self.status != "aborted")

    def reopen(self) -> None:
        """Undo finalize's close (end_ts, status "finalized"): the run has Phase 4 work again
        (compare --seeds N after finalize, or an arm found missing); the next finalize closes it."""
        if self.status == "finalized":
            self.status, self.end_reason = self.end_reason or "completed", None
        self.end_ts = self.total_duration_s = None

    @property
    def unique_prompts_per_step(self) -> int:
        return self.batch_size // self.rollouts_per_example


class IterRecord(BaseModel):
    """One finished arm (iter_N or a Phase 4 control) in metrics.json."""

    model_config = ConfigDict(extra="forbid")

    arm: str  # unique key: "iter_0", "iter_3", "run_a", "run_b", "run_c"; seed replicates "run_a_seed1", "iter_3_seed1"
    iter: int | None = None  # iteration index for iter_N arms, None for controls
    eval_acc: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)  # a NaN would sort and recommend as a score
    eval_reward_mean: float = Field(allow_inf_nan=False)
    n_eval: int
    acc_ci95: tuple[float, float]  # Wilson 95% interval of eval_acc over n_eval examples
    train_reward_mean: float | None = None
    rows: int | None = None  # training rows of the arm's synthetic dataset (None = real data)
    checkpoint: str | None = None
    final_step: int | None = None
    eval_policy_step: int | None = None  # the policy the final eval scored (EvalSummary.eval_policy_step)
    source: str = "trained"  # "trained" | "init-from"
    eval_split: str = "eval"  # which split the numbers were measured on
    ts: float | None = None
    seed: int | None = None  # training seed (orchestrator.seed) it ran with; None = not recorded (older files) or unset
    replicate_of: str | None = None  # a seed replicate: the arm it repeats with another seed (e.g. "run_a"); None = the original


class Metrics(FileModel):
    """metrics.json: the finished arms, in the order they finished."""

    iters: list[IterRecord] = Field(default_factory=list)

    @field_validator("iters")
    @classmethod
    def _one_record_per_arm(cls, iters: list[IterRecord]) -> list[IterRecord]:
        """Two records of one arm (a duplicated row) would count one result twice; which one is right
        is the user's call, so refuse rather than pick."""
        seen: set[str] = set()
        for r in iters:
            if r.arm in seen:
                raise ValueError(f"arm '{r.arm}' is recorded twice; delete one of its two records "
                                 f"(or delete both and re-run the phase that trained it)")
            seen.add(r.arm)
        return iters

    def get(self, arm: str) -> IterRecord | None:
        return next((r for r in self.iters if r.arm == arm), None)


class RewardFunc(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    weight: float


class RubricMember(BaseModel):
    """One rubric inside the env's RubricGroup, with its functions (weight 0 = metric only)."""

    model_config = ConfigDict(extra="forbid")
    rubric_class: str
    funcs: list[RewardFunc] = Field(default_factory=list)


class TrainSample(BaseModel):
    """A TRAIN row of the hub env, recorded to show the answer encoding (never an eval row)."""

    model_config = ConfigDict(extra="forbid")
    question: str
    answer: str
    info: dict[str, Any] = Field(default_factory=dict)


class HubEnv(FileModel):
    """hub_env.json: the stack of the real environment, which generated envs mirror."""

    env_id: str  # id passed to load_environment
    env_args: dict[str, Any] = Field(default_factory=dict)
    module: str  # python module that provides load_environment (or, for a Taskset-only env, the v1 Taskset)
    source: Literal["hub", "local", "env-path"]
    env_class: str
    parser_class: str
    parser_config: dict[str, Any] = Field(default_factory=dict)  # XMLParser fields/answer_field, extract_fn
    rubric_class: str  # after unwrapping a RubricGroup
    rubric_funcs: list[RewardFunc]
    rubric_group: list[RubricMember] | None = None  # the RubricGroup's members when env.rubric is one
    system_prompt: str | None
    answer_format_instruction: str | None  # the sentence of system_prompt that states the answer format
    train_size: int | None
    eval_size: int | None
    train_samples: list[TrainSample] = Field(default_factory=list)
    # How long the TRAIN reference answers are, in characters: {rows, longest, median} over up to 2000
    # unsealed rows; a generated config's completion budget follows it. None: not measured (no answer
    # field, or a hub_env.json written before this field existed).
    train_answer_chars: dict[str, int] | None = None
    warnings: list[str] = Field(default_factory=list)
    verifiers_version: str | None = None
    introspected_at: float | None = None
    # What every arm is scored on, and so what the dataset gate keeps out of generated data:
    # "eval split (N rows)", or the first N train rows when the env has no eval split.
    evaluated_rows: str | None = None
    # Without an eval split: the example ids of those first train rows (ids only, they are sealed); their
    # train rollouts never reach the teacher (failures.jsonl, analysis.json, weakness_stats.json).
    # None: the env has an eval split, or (a Taskset-only v1 env) the ids are not known.
    evaluated_example_ids: list[int | str] | None = None
    # Which verifiers API the run's engine loads the env through: "verifiers.classic" (load_environment;
    # the fields above) or "verifiers.v1" (a Taskset; `taskset` holds its Task class, rewards, train/eval
    # config and how rewards read the answer, from stack.verifiers_v1.describe_taskset).
    api: Literal["verifiers.classic", "verifiers.v1"] = "verifiers.classic"
    taskset: dict[str, Any] | None = None

    def answer_format_text(self) -> str:
        """The format sentence, or what decides the format when no sentence states it."""
        if self.answer_format_instruction:
            return self.answer_format_instruction
        fields = self.parser_config.get("fields")
        where = "no sentence of the system prompt states it" if self.system_prompt else "the env has no system prompt"
        # a Taskset-only env's module may hold no parser: its Task's rewards read the reply themselves
        decider = f"the {self.rubric_class} task's rewards" if self.parser_class == "none" else self.parser_class
        return f"({where}; the {decider}{f' {fields}' if fields else ''} decides: see the train samples)"


class ExampleScore(BaseModel):
    """Numeric result of one eval example (mean over its rollouts). Nothing else of an eval row."""

    model_config = ConfigDict(extra="forbid")
    example_id: int | str
    reward: float
    correct: float  # share of the example's rollouts judged correct (0/1 with one rollout)


class EvalSummary(FileModel):
    """<arm>/eval_summary.json: sealed aggregate of the arm's final eval rollouts."""

    arm: str
    eval_acc: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    eval_reward_mean: float = Field(allow_inf_nan=False)
    n_eval: int  # number of eval rollouts aggregated
    n_examples: int  # distinct example ids
    acc_ci95: tuple[float, float]
    train_reward_mean: float | None = None  # over the last train steps (see train_reward_steps)
    train_reward_steps: list[int] = Field(default_factory=list)
    checkpoint: str | None = None
    final_step: int | None = None
    # the policy version the final eval scored: final_step in the seed dialect; in prime-rl main <= final_step - 1
    # (its eval of max_steps fires before the last train step: phases/evals.eval_policy_step); None = unknown
    eval_policy_step: int | None = None
    source: str = "trained"
    eval_file: str | None = None
    dropped_lines: int = 0  # torn / non-JSON lines skipped (reported, not fatal)
    correct_rule: str = "metrics.is_correct"  # or "reward >= 0.5" when is_correct is absent
    per_example: list[ExampleScore] = Field(default_factory=list)
