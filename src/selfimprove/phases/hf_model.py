"""The model an arm hands the user: a directory `transformers` loads, in both dialects.

- seed (prime-rl 09e297743): the trainer's own HF save, `prime_out/weights/step_F`.
- v1 (prime-rl main 559b44772): main writes no HF weights (commit 29e422276 removed
  `weights/step_N`; the `scripts/dcp_to_hf.py` it names is not in the tree, and its docs point
  users at the DCP checkpoint: docs/overview.md:35, docs/training.md:270-274). What it does
  write is the filesystem weight broadcast, which every arm pins
  (`Dialect.weight_broadcast`): `broadcasts/step_F/model*.safetensors` with HF key names
  (+ `model.safetensors.index.json` when sharded), final step included (trainer/rl/train.py:
  582-586; trainer/utils.py:349-363 keeps step_{max-1} and step_{max}), and no config or
  tokenizer (transports/weights/filesystem.py:33-70). So the model is assembled as
  `<arm>/model/step_F/`: the broadcast's safetensors (hard links) + the base model's
  config.json, generation_config.json and tokenizer files. The base model is the one the
  engine resolved (`prime_out/configs/trainer.toml` model.name): a local dir, a built-in
  student's cached dir, or a Hugging Face hub id found in the local HF cache.

Built at a temp name and renamed into place (a kill leaves the whole dir or none); rebuilt
when missing, so re-running after a kill finishes it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import tomllib
from pathlib import Path

from ..rundir import ArmDir

# What transformers' Auto* classes read besides the weights (config, generation defaults, tokenizer).
BASE_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
              "special_tokens_map.json", "added_tokens.json", "chat_template.jinja", "vocab.json", "vocab.txt",
              "merges.txt", "tokenizer.model")


def model_dir(arm: ArmDir, step: int) -> Path:
    """Where the v1 model of `arm` at `step` is assembled (outside prime_out/, which is the engine's)."""
    return arm.dir / "model" / f"step_{step}"


def base_model_name(arm: ArmDir) -> str | None:
    """model.name as the engine resolved it (prime-rl writes its resolved configs under configs/)."""
    for name in ("trainer.toml", "orchestrator.toml"):
        try:
            cfg = tomllib.loads((arm.prime_out / "configs" / name).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            continue
        model = cfg.get("model")
        if isinstance(model, dict) and isinstance(model.get("name"), str):
            return model["name"]
    return None


def base_model_files(name: str) -> Path | None:
    """A local directory holding the base model's config and tokenizer, or None (never downloads)."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    from ..rl import builtin_students  # the registry only: no torch

    builtin = builtin_students.find(name)
    if builtin is not None:
        return builtin.on_disk()
    try:  # a hub id: the copy a GPU run downloaded into the local HF cache
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, allow_patterns=list(BASE_FILES), local_files_only=True))
    except Exception:  # not cached, no huggingface_hub, or not a repo id
        return None


def build_v1_model(arm: ArmDir, step: int) -> Path | None:
    """`<arm>/model/step_F` from the final filesystem broadcast + the base model's files; None when the
    broadcast or the base files are missing (the caller then names the trainer checkpoint instead)."""
    out = model_dir(arm, step)
    if (out / "config.json").is_file():
        return out
    broadcast = arm.broadcast(step)
    weights = sorted(broadcast.glob("model*.safetensors")) if (broadcast / "STABLE").is_file() else []
    name = base_model_name(arm)
    base = base_model_files(name) if name else None
    if not weights or base is None or not (base / "config.json").is_file():
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for f in [*weights, *broadcast.glob("model.safetensors.index.json")]:
            _link_or_copy(f, tmp / f.name)
        for fname in BASE_FILES:
            if (base / fname).is_file():
                shutil.copy2(base / fname, tmp / fname)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)  # main deletes old broadcasts with rmtree: a hard link keeps these bytes
    except OSError:
        shutil.copy2(src, dst)
