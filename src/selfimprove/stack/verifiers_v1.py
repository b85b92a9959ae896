"""A verifiers v1 taskset module, checked and described the way prime-rl >= 0.8 uses it.

prime-rl main imports a taskset id as a module whose `__all__` exports exactly one
`verifiers.v1.Taskset` subclass (prime-rl #3226). `find_taskset` resolves an id with verifiers'
own loader (`verifiers.v1.utils.loaders.taskset_class`, what prime-rl calls while its config
validates) and turns its failures into one line naming the id and the fix; `describe_taskset`
reads what the teacher contract needs for hub_env.json: the Task class, its rewards with weights
and its metrics, the config fields, the first task's prompt, system prompt and answer field, the
train/eval arguments, 3 TRAIN tasks as samples (eval tasks are counted, never read), and how the
answer is read (a v1 reward reads the reply from the trace itself: the parser objects its module
holds are named, and every reward is run once on probe replies, so a reward that raises on a reply it
cannot read is refused here, not mid-training).

`taskset_for_env` finds the taskset id of an env module: the module itself when it exports one,
else its top-level `<module>_v1` companion (the layout `selfimprove_arith` ships: a classic env,
and `selfimprove_arith_v1` naming its v1 Taskset). Not `<module>.v1`: the loader first looks up
`verifiers.v1.tasksets.<id>`, and for a dotted id that lookup raises before the id is tried.
`trace_for` / `score_reply` score one reply offline (no model server), as the CPU engine does.

This imports the env, so selfimprove runs it in a fresh interpreter, the env's (taskset_probe.py
answers the requests there). What the phases call is env_api_v1.py.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import sys
from typing import Any

from ..errors import ConfigError

API = "verifiers.v1"
LOADER_NAMESPACE = "verifiers.v1.tasksets"  # where verifiers' loader looks for a taskset id first
N_TRAIN_SAMPLES = 3  # train tasks shown to the teacher (eval tasks: counted only)
PROBE_REPLIES = ("", "I do not know.")  # replies no reward may raise on (a wrong reply scores, it does not crash)


# ---------------------------------------------------------------- finding the taskset


def find_taskset(taskset_id: str) -> type:
    """The one Taskset class `taskset_id` names, found by verifiers' own loader (as prime-rl finds it);
    ConfigError naming the id and the fix otherwise."""
    from verifiers.v1.utils import loaders

    try:  # importing first, apart: an error raised while the module runs is not an export problem
        loaders.import_taskset(taskset_id)
    except ModuleNotFoundError as e:
        if (e.name or "").startswith(LOADER_NAMESPACE + "."):  # find_spec of the namespaced name, on the id's dot
            raise ConfigError(
                f"taskset module '{taskset_id}': a dotted id, which verifiers' loader cannot import (it looks up "
                f"'{LOADER_NAMESPACE}.{taskset_id}' first and fails on the dot); export the Taskset from a top-level "
                f"module and give its name (e.g. '{taskset_id.replace('.', '_')}', as selfimprove_arith_v1 does)") from None
        raise ConfigError(f"taskset module '{taskset_id}': cannot import it ({first_line(e.__cause__ or e)}); "
                          f"install the env package") from None
    try:
        return loaders.taskset_class(taskset_id)
    except AttributeError:
        raise ConfigError(f"taskset module '{taskset_id}': no __all__; export its one Taskset class in __all__ "
                          f"(prime-rl >= 0.8 reads only that)") from None
    except (TypeError, ValueError) as e:  # verifiers: no Taskset exported (TypeError), or several (ValueError)
        said = (str(e).strip().splitlines() or [type(e).__name__])[0]  # verifiers' own line ends with the fix
        raise ConfigError(f"taskset id '{taskset_id}' refused by verifiers' loader: {said}") from None


def taskset_for_env(env_module: str) -> str:
    """The taskset id (a module name) of an env module: itself when it exports a Taskset, else `<module>_v1`."""
    for name in (env_module, companion_id(env_module)):
        if not _importable(name):
            continue
        module = importlib.import_module(name)
        if _exports_a_taskset(module) or name != env_module:
            return name
    if _importable(f"{env_module}.v1"):  # the layout this project used before: refused by the loader
        raise ConfigError(
            f"env module '{env_module}' keeps its Taskset in '{env_module}.v1', a dotted id that verifiers' loader "
            f"(and so prime-rl >= 0.8) cannot import; re-export it from a top-level module '{companion_id(env_module)}' "
            f"with __all__ naming the Taskset (see selfimprove_arith_v1)")
    raise ConfigError(
        f"env module '{env_module}' exports no verifiers v1 Taskset and has no '{companion_id(env_module)}' module; "
        f"prime-rl >= 0.8 runs only Tasksets (#3226): add one (see selfimprove_arith_v1), or run with --stack seed"
    )


def companion_id(env_module: str) -> str:
    """The top-level module that names a classic env's v1 Taskset (selfimprove_arith -> selfimprove_arith_v1)."""
    return f"{env_module}_v1"


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # find_spec imports the parent package of a dotted name
        return False


def _exports_a_taskset(module) -> bool:
    import verifiers.v1 as vf

    return any(inspect.isclass(c) and issubclass(c, vf.Taskset) for c in (getattr(module, n, None) for n in getattr(module, "__all__", [])))


def config_class(taskset_class: type) -> type:
    from verifiers.v1.configs.taskset import TasksetConfig
    from verifiers.v1.utils.generic import concrete_type

    return concrete_type(taskset_class, TasksetConfig) or TasksetConfig


def load_tasks(module_name: str, args: dict[str, Any] | None = None, limit: int | None = None) -> list:
    """The tasks of taskset `module_name` built with config fields `args` (the first `limit`, or all)."""
    taskset_class = find_taskset(module_name)
    try:
        taskset = taskset_class(config_class(taskset_class)(id=module_name, **(args or {})))
    except Exception as e:  # pydantic refuses an unknown or mistyped field
        raise ConfigError(f"taskset module '{module_name}': config {args or {}} refused: {first_line(e)}; "
                          f"use the fields of {config_class(taskset_class).__name__}") from None
    if limit is not None and limit >= 0:
        taskset = first_tasks(taskset, limit)
    return list(taskset)


def first_tasks(taskset, n: int):
    """A view of the taskset's first `n` tasks: `head` in verifiers 0.3's v1, `take` in 0.4."""
    view = getattr(taskset, "head", None) or taskset.take
    return view(n)


# ---------------------------------------------------------------- scoring one reply offline


def trace_for(task, reply: str):
    """A verifiers v1 Trace holding the task's prompt and one assistant reply, as a finished rollout leaves it."""
    import verifiers.v1 as vf
    from verifiers.v1.state import state_cls
    from verifiers.v1.types import AssistantMessage, SystemMessage, UserMessage

    trace = vf.Trace(task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
                     state=state_cls(type(task))(), agent=vf.AgentInfo(config=vf.AgentConfig(), name="selfimprove"))
    messages = [SystemMessage(content=task.data.system_prompt)] if task.data.system_prompt else []
    prompt = task.data.prompt
    messages += [UserMessage(content=prompt)] if isinstance(prompt, str) else list(prompt or [])
    messages.append(AssistantMessage(content=reply))
    for i, message in enumerate(messages):
        trace.nodes.append(vf.MessageNode(parent=i - 1 if i else None, message=message,
                                          sampled=i == len(messages) - 1))
    trace.is_completed = True
    return trace


async def score_reply(task, reply: str):
    """The task's own rewards and metrics on `reply`; returns the scored trace (raises when scoring raises)."""
    trace = trace_for(task, reply)
    await task.score(trace)
    return trace


def prompt_messages(task) -> list[dict[str, str]]:
    """The task's prompt as chat messages (system first), the shape the engine renders."""
    from verifiers.v1.types import content_text

    out = [{"role": "system", "content": task.data.system_prompt}] if task.data.system_prompt else []
    prompt = task.data.prompt
    if isinstance(prompt, str):
        return out + [{"role": "user", "content": prompt}]
    return out + [{"role": m.role, "content": content_text(m.content)} for m in prompt or []]


# ---------------------------------------------------------------- describing it for hub_env.json


def reward_functions(task_class: type) -> list[tuple[str, float]]:
    """(name, weight) of every `@vf.reward` method of a Task class, sorted by name."""
    out = []
    for name, fn in inspect.getmembers(task_class, callable):
        if getattr(fn, "_vf_weight", None) is not None:
            out.append((name, float(fn._vf_weight)))
    return sorted(out)


def metric_functions(task_class: type) -> list[str]:
    return sorted(name for name, fn in inspect.getmembers(task_class, callable) if hasattr(fn, "metric_priority"))


def parsers_in(module_name: str) -> list[dict[str, Any]]:
    """The verifiers parser objects a taskset module holds at top level (what its rewards read the reply with)."""
    module = sys.modules[module_name]
    out = []
    for attr, obj in sorted(vars(module).items()):
        if callable(getattr(obj, "parse_answer", None)) and not inspect.isclass(obj):
            entry: dict[str, Any] = {"attr": attr, "class": type(obj).__name__, "module": type(obj).__module__}
            fields = getattr(obj, "_fields", None)
            if isinstance(fields, list):
                entry["fields"] = [f[0] if isinstance(f, tuple) else f for f in fields]
            if hasattr(obj, "answer_field"):
                entry["answer_field"] = obj.answer_field
            out.append(entry)
    return out


def split_args(module_name: str, config_fields: list[str], env_args: dict[str, Any]) -> tuple[dict, dict, str]:
    """(train args, eval args, how the eval rows were found). A v1 taskset has no eval split of its own:
    a `split` config field that accepts "eval" gives one; otherwise arms are evaluated on the same taskset."""
    if "split" not in config_fields or "split" in env_args:
        return dict(env_args), dict(env_args), "the taskset as configured (it has no split field, or env args set it)"
    try:
        has_eval = bool(load_tasks(module_name, {**env_args, "split": "eval"}, limit=1))
    except Exception:
        has_eval = False
    if not has_eval:
        return dict(env_args), dict(env_args), "split 'eval' loads nothing: arms are evaluated on the train taskset"
    return {**env_args, "split": "train"}, {**env_args, "split": "eval"}, "config field split = \"eval\""


def describe_taskset(module_name: str, config: dict[str, Any] | None = None, evaluated_examples: int = -1) -> dict[str, Any]:
    """What hub_env.json records for a v1 taskset; ConfigError (one line: the module and the fix) when
    it exports no Taskset or two, its task has no reward, it yields no task, or a reward raises on a probe reply."""
    taskset_class = find_taskset(module_name)
    task_class = taskset_class.task_type()
    rewards = reward_functions(task_class)
    if not rewards:
        raise ConfigError(f"taskset module '{module_name}': task {task_class.__name__} has no @vf.reward method; "
                          f"add one (RL needs a reward to train on)")
    cfg_class = config_class(taskset_class)
    fields = sorted(set(cfg_class.model_fields) - {"id", "task", "system_prompt"})
    train_args, eval_args, eval_from = split_args(module_name, fields, dict(config or {}))
    tasks = load_tasks(module_name, train_args)
    if not tasks:
        raise ConfigError(f"taskset module '{module_name}': load() yielded no task with {train_args}; check the split or size fields")
    eval_rows = len(load_tasks(module_name, eval_args)) if eval_args != train_args else None  # counted, never read
    # Without an eval split arms are scored on the first `evaluated_examples` train tasks: sealed, so only
    # their ids are recorded (their train rollouts never reach the teacher) and no sample is drawn from them.
    sealed_ids, first_unsealed = None, 0
    if eval_rows is None:
        first_unsealed = len(tasks) if evaluated_examples < 0 else min(evaluated_examples, len(tasks))
        sealed_ids = [t.data.idx if t.data.idx is not None else i for i, t in enumerate(tasks[:first_unsealed])]
    # The example prompt and the probe with a real answer come from a task the arms are NOT scored on:
    # hub_env.json reaches the teacher (the agent, the LLM teacher's requests). When every task is
    # sealed there is no example, and the probes use fixed replies only.
    first = tasks[first_unsealed] if first_unsealed < len(tasks) else tasks[0]
    example = first if first_unsealed < len(tasks) else None
    own = sorted(set(type(first.data).model_fields) - set(_task_data_fields()))
    answer_field = "answer" if "answer" in own else (own[0] if own else None)
    probes = {}
    real_answer = (str(getattr(example.data, answer_field, "")) if answer_field else "0") if example else None
    for reply in (*PROBE_REPLIES, *([real_answer] if real_answer is not None else [])):
        try:
            trace = asyncio.run(score_reply(first, reply))
        except Exception as e:
            cause = e.__cause__ or e
            raise ConfigError(
                f"taskset module '{module_name}': a reward of task {task_class.__name__} raised on the probe reply "
                f"{reply!r} ({first_line(cause)}); make it return 0.0 for a reply it cannot read"
            ) from None
        probes[reply] = {name: (r.score if r is not None else None) for name, r in trace.rewards.items()}
    from ._env_probe import sampled_indices
    picked = sampled_indices(first_unsealed, len(tasks), N_TRAIN_SAMPLES)
    return {
        "api": API,
        "taskset_id": module_name,
        "taskset_class": taskset_class.__name__,
        "task_class": task_class.__name__,
        "task_module": task_class.__module__,
        "rewards": [{"name": n, "weight": w} for n, w in rewards],
        "metrics": metric_functions(task_class),
        "config_fields": fields,
        "train_args": train_args,
        "eval_args": eval_args,
        "eval_rows_from": eval_from,
        "train_rows": len(tasks),
        "eval_rows": eval_rows,
        "system_prompt": first.data.system_prompt,
        "example_prompt": example.data.prompt if example is not None else None,
        "answer_field": answer_field,
        "task_fields": own,
        "answer_extraction": {
            "how": "each @vf.reward reads the reply from the trace (trace.last_message) and the ground truth from the task data",
            "parsers": parsers_in(module_name),
            "probe_rewards": probes,
        },
        # read by describe_env into hub_env.json's own fields (not kept in this section)
        "train_samples": [train_sample(tasks[i], answer_field) for i in picked],
        "train_answer_chars": _answer_chars(tasks, answer_field, first_unsealed),
        "evaluated_example_ids": sealed_ids,
        "verifiers_version": _verifiers_version(),
    }


def train_sample(task, answer_field: str | None) -> dict[str, Any]:
    """A TRAIN task as hub_env.json's `train_samples` show a row: its user prompt, its answer, its other fields
    (strings clipped as the classic probe clips its samples)."""
    from ._env_probe import clip
    users = [m["content"] for m in prompt_messages(task) if m["role"] == "user"]
    own = {f: getattr(task.data, f) for f in type(task.data).model_fields if f not in _task_data_fields()}
    answer = own.pop(answer_field, "") if answer_field else ""
    return {"question": clip(users[-1] if users else ""), "answer": clip("" if answer is None else str(answer)),
            "info": {k: clip(v if isinstance(v, (bool, int, float)) or v is None else str(v)) for k, v in own.items()}}


def _answer_chars(tasks: list, answer_field: str | None, first_unsealed: int) -> dict[str, int] | None:
    """The classic probe's `train_answer_chars` over the unsealed TRAIN tasks' answers (None: no answer field)."""
    from ._env_probe import answer_chars, answer_text, sampled_indices
    if not answer_field:
        return None
    return answer_chars([answer_text(getattr(tasks[i].data, answer_field, None))
                         for i in sampled_indices(first_unsealed, len(tasks))])


def _verifiers_version() -> str | None:
    import verifiers

    return getattr(verifiers, "__version__", None)


def _task_data_fields() -> list[str]:
    import verifiers.v1 as vf

    return list(vf.TaskData.model_fields)


def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__
