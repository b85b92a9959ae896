"""Whether a local model dir is one the engine can load, checked without importing torch (the
orchestrator runs it at bootstrap and before each launch; a failure inside the engine would
cost a launch and read as a crash that `--restart` cannot fix).

    check_model_dir(path, "--model X", fix)   # a local HF dir the engine can load, else one line

A local model dir must hold a config.json that is a UTF-8 JSON object naming its
`model_type` (transformers picks the architecture by it), a weights file, and, for the
CPU engine (PreTrainedTokenizerFast), tokenizer.json and a chat template. What a built-in
student needs installed is its registry entry's `extras` (builtin_students.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ConfigError, SelfImproveError

# Any of these holds the weights from_pretrained loads (a sharded checkpoint has an index).
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


def check_model_dir(path: Path, label: str, fix: str, *, tokenizer: bool,
                    error: type[SelfImproveError] = ConfigError) -> None:
    """Raise `error` (one line: `label`, the file, what is wrong, `fix`) unless `path` is a model dir
    the engine can load. `tokenizer`: also require tokenizer.json (the CPU engine's fast tokenizer)."""
    path = Path(path)
    config = path / "config.json"
    if not config.is_file():
        raise error(f"{label}: no config.json in {path}; {fix}")
    try:
        data = json.loads(config.read_bytes().decode("utf-8"))
    except OSError as e:
        raise error(f"{label}: cannot read {config} ({e.strerror}); {fix}") from None
    except UnicodeDecodeError:
        raise error(f"{label}: {config} is not UTF-8 text; {fix}") from None
    except json.JSONDecodeError as e:
        raise error(f"{label}: {config} is not valid JSON ({e.msg} at line {e.lineno}); {fix}") from None
    if not isinstance(data, dict):
        raise error(f"{label}: {config} is a JSON {type(data).__name__}, not an object; {fix}")
    if not isinstance(data.get("model_type"), str) or not data["model_type"]:
        raise error(f"{label}: {config} has no model_type (transformers picks the architecture by it); {fix}")
    if not any((path / name).is_file() for name in WEIGHT_FILES) and not any(path.glob("*.safetensors")):
        raise error(f"{label}: {path} holds no weights (model.safetensors or pytorch_model.bin); {fix}")
    if tokenizer and not (path / "tokenizer.json").is_file():
        raise error(f"{label}: {path} has no tokenizer.json (the CPU engine loads a fast tokenizer); {fix}")
    if tokenizer and not has_chat_template(path):
        raise error(f"{label}: {path} has no chat template (chat_template.jinja, or chat_template in "
                    f"tokenizer_config.json); the CPU engine renders every prompt with it: {fix}")


def has_chat_template(path: Path) -> bool:
    """Where save_pretrained puts a tokenizer's template: chat_template.jinja (transformers >= 4.50) or
    tokenizer_config.json's chat_template (before); an unreadable tokenizer_config.json has none."""
    if (path / "chat_template.jinja").is_file():
        return True
    try:
        config = json.loads((path / "tokenizer_config.json").read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(config, dict) and bool(config.get("chat_template"))
