"""RunContext: what a phase knows about its run, read once when the phase starts.

A phase builds it under the run lock (`RunContext.load(rd)`) and hands it to its
helpers, which then take the run's settings from it instead of reading run.json
again: the run dir, run.json, its dialect, hub_env.json (once introspected), the
env Python and the canonical config iter_0 trained with.

It is frozen: a phase that writes run.json carries the new copy on with
`ctx.with_cfg(cfg)` (the writer returns it), so no helper acts on a stale copy.
(A few writers change `ctx.cfg` in place and write it at once, e.g. iterate's
budget gate; the copy then still matches the file.)
Only the read-modify-writes that may race another thread of this process
(compare's arms logging their errors) read run.json afresh, under `rd.updating()`.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ..errors import ConfigError, RunDirError
from ..models import HubEnv, RunConfig
from ..rundir import RunDir, read_model
from ..stack.dialects import dialect_for
from ..stack.prime_rl import Dialect
from ..stack.env_python import env_python_of


def canonical_path(rd: RunDir) -> Path:
    """The canonical config iter_0 trained with (baseline copies it into iter_0/)."""
    p = rd.iter(0).dir / "canonical_rl.toml"
    if not p.is_file():
        raise ConfigError(f"{p}: missing; iter_0 was not trained by `selfimprove baseline` here. "
                          "Pass the canonical config with `selfimprove bootstrap --config` and re-run baseline")
    return p


def _hub_env_or_none(rd: RunDir) -> HubEnv | None:
    # A damaged hub_env.json must not fail a phase that only labels with it (or `status`);
    # the helpers that need it call required_hub(), which names the damage.
    try:
        return read_model(rd.hub_env_json, HubEnv) if rd.hub_env_json.is_file() else None
    except RunDirError:
        return None


@dataclass(frozen=True)
class RunContext:
    rd: RunDir
    cfg: RunConfig  # run.json as this phase last wrote or read it
    hub: HubEnv | None  # hub_env.json; None before introspect, or when unreadable (see required_hub)

    @classmethod
    def load(cls, rd: RunDir) -> RunContext:
        return cls(rd, rd.read_run(), _hub_env_or_none(rd))

    def with_cfg(self, cfg: RunConfig) -> RunContext:
        """This context with the run.json the phase has just written."""
        return dataclasses.replace(self, cfg=cfg)

    @property
    def dialect(self) -> Dialect:
        """The run's prime-rl / verifiers dialect (run.json `stack`)."""
        return dialect_for(self.cfg)

    @property
    def env_python(self) -> str:
        """The interpreter env work runs in; checked on each use, so a vanished venv is named where it is needed."""
        return env_python_of(self.cfg)

    def required_hub(self) -> HubEnv:
        """hub_env.json, or the one-line error that says why there is none (missing: run introspect;
        damaged: the file and the field)."""
        return self.hub if self.hub is not None else self.rd.read_hub_env()

    def introspected_hub(self) -> HubEnv | None:
        """hub_env.json when introspect wrote one (a damaged one is named, as by required_hub), else None."""
        return self.required_hub() if self.rd.hub_env_json.is_file() else None

    @cached_property
    def _canonical(self) -> dict:
        # Parsed on first use only: baseline writes iter_0/canonical_rl.toml during its own phase.
        return self.dialect.read_toml(canonical_path(self.rd))

    def canonical_config(self) -> dict:
        """The canonical config iter_0 trained with (iter_0/canonical_rl.toml); a fresh copy per call, since
        builders merge into what they are given and the arms of compare share one context."""
        return copy.deepcopy(self._canonical)
