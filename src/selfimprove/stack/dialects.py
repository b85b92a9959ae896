"""The run's prime-rl / verifiers dialect, as one object the phases call.

Two dialects sit side by side, each a module with the same functions (config builders,
validation, TOML IO, the `rl` argv, canonical-config discovery):

- `prime_rl`      "seed": prime-rl main at 09e297743 (May 2026, <= v0.7) + classic verifiers envs;
- `prime_rl_v08`  "v1":   prime-rl main at 559b44772 (Aug 2026, v0.8.1.dev67) + verifiers v1 Tasksets.

Phases never branch on the version: they call `dialect_for(cfg).resume_config(...)`.
"""

from __future__ import annotations

from types import ModuleType

from . import prime_rl, prime_rl_v08

DIALECTS: dict[str, ModuleType] = {prime_rl.NAME: prime_rl, prime_rl_v08.NAME: prime_rl_v08}


def dialect_named(name: str | None) -> ModuleType:
    """The dialect module for a --stack value; None (an older run.json) is the seed's."""
    return DIALECTS[name or prime_rl.NAME]


def dialect_for(cfg) -> ModuleType:
    """The dialect module of a run (its run.json `stack`)."""
    return dialect_named(getattr(cfg, "stack", None))


# Keys only the v0.8 dialect has, at the top of a config or in [orchestrator] / its groups.
_V08_TOP = {"resume", "clean", "monitors", "run"}


def dialect_of_argv(argv: list[str]) -> ModuleType:
    """The dialect an `rl` argv is written in: v0.8 when it names a run (--run.name, which the
    v0.8 writer always passes) or any of its files holds a key only prime-rl >= 0.8 has."""
    if any(tok == "--run.name" or tok.startswith(("--run.name=", "--orchestrator.group-size", "--resume")) for tok in argv):
        return prime_rl_v08
    for i, tok in enumerate(argv[:-1]):
        if tok == "@":
            try:
                data = prime_rl.read_toml(argv[i + 1])
            except Exception:  # the dialect's own parser names a bad file
                continue
            orch = data.get("orchestrator") or {}
            groups = [orch.get(g) or {} for g in ("train", "eval")]
            if _V08_TOP & set(data) or "group_size" in orch or any("source" in g or "group_size" in g for g in groups):
                return prime_rl_v08
    return prime_rl
