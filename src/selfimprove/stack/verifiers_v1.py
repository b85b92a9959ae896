"""A verifiers v1 taskset module, checked and described the way prime-rl >= 0.8 uses it.

prime-rl main imports a taskset id as a module whose `__all__` exports exactly one
`verifiers.v1.Taskset` subclass (prime-rl #3226). `find_taskset` applies that rule with one
line naming the module and the fix; `describe_taskset` reads what the teacher contract needs
(the API, the Task class, its rewards with weights and its metrics, the config fields, and
the first task's prompt, system prompt and answer field), for hub_env.json.

This runs in the interpreter that has the env installed (it imports the module).
Not covered yet: how the answer is extracted (a v1 reward reads the trace itself; there is
no parser object to name), and wiring into `selfimprove introspect`.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from ..errors import ConfigError

API = "verifiers.v1"


def find_taskset(module_name: str) -> type:
    """The one Taskset class `module_name` exports; ConfigError naming the module and the fix otherwise."""
    import verifiers.v1 as vf

    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"taskset module '{module_name}': cannot import it ({e}); install the env package") from None
    names = getattr(module, "__all__", None)
    if names is None:
        raise ConfigError(f"taskset module '{module_name}': no __all__; export its one Taskset class in __all__ (prime-rl >= 0.8 reads only that)")
    found = [getattr(module, n, None) for n in names]
    tasksets = [c for c in found if inspect.isclass(c) and issubclass(c, vf.Taskset)]
    if len(tasksets) != 1:
        what = "no Taskset" if not tasksets else f"{len(tasksets)} Tasksets ({', '.join(c.__name__ for c in tasksets)})"
        raise ConfigError(f"taskset module '{module_name}': __all__ exports {what}; export exactly one verifiers.v1 Taskset subclass")
    return tasksets[0]


def reward_functions(task_class: type) -> list[tuple[str, float]]:
    """(name, weight) of every `@vf.reward` method of a Task class, sorted by name."""
    out = []
    for name, fn in inspect.getmembers(task_class, callable):
        if getattr(fn, "_vf_weight", None) is not None:
            out.append((name, float(fn._vf_weight)))
    return sorted(out)


def metric_functions(task_class: type) -> list[str]:
    return sorted(name for name, fn in inspect.getmembers(task_class, callable) if hasattr(fn, "metric_priority"))


def describe_taskset(module_name: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """What hub_env.json records for a v1 taskset; ConfigError when it has no reward or no task."""
    taskset_class = find_taskset(module_name)
    task_class = taskset_class.task_type()
    rewards = reward_functions(task_class)
    if not rewards:
        raise ConfigError(f"taskset module '{module_name}': task {task_class.__name__} has no @vf.reward method; "
                          f"add one (RL needs a reward to train on)")
    config_class = _config_class(taskset_class)
    cfg = config_class(id=module_name, **(config or {}))
    first = next(iter(taskset_class(cfg)), None)
    if first is None:
        raise ConfigError(f"taskset module '{module_name}': load() yielded no task with {config or {}}; check the split or size fields")
    data = first.data
    own = set(type(data).model_fields) - set(_task_data_fields())
    return {
        "api": API,
        "taskset_class": taskset_class.__name__,
        "task_class": task_class.__name__,
        "rewards": [{"name": n, "weight": w} for n, w in rewards],
        "metrics": metric_functions(task_class),
        "config_fields": sorted(set(config_class.model_fields) - {"id", "task", "system_prompt"}),
        "system_prompt": data.system_prompt,
        "example_prompt": data.prompt,
        "answer_field": "answer" if "answer" in own else (sorted(own)[0] if own else None),
        "task_fields": sorted(own),
    }


def _config_class(taskset_class: type) -> type:
    from verifiers.v1.configs.taskset import TasksetConfig
    from verifiers.v1.utils.generic import concrete_type

    return concrete_type(taskset_class, TasksetConfig) or TasksetConfig


def _task_data_fields() -> list[str]:
    import verifiers.v1 as vf

    return list(vf.TaskData.model_fields)
