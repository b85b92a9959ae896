"""The tiny student: a Qwen3 causal LM of ~1M parameters with a character-level
tokenizer that needs no download, and the built-in model ids.

`model.name` in a config is either a local Hugging Face directory (anything
`AutoModelForCausalLM.from_pretrained` reads, with a tokenizer that has a chat
template) or a built-in id:

    selfimprove/tiny-arith   the base student of the embedded default: a random
                             Qwen3 after a seeded, step-based supervised warm-up
                             on arithmetic (see warmup.py). Ships with the
                             package, built from the recipe
                             (rl/students/tiny-arith/, see shipped.py), so no
                             user ever waits for the warm-up.
    selfimprove/smollm2-135m   SmolLM2-135M-Instruct, a real pretrained student
                             converted once from the GGUF of the optional extra
                             `smollm2` (see gguf_student.py).

The shipped weights are used while their recipe.json hash equals
`warmup.recipe_hash()`. When the recipe changed without a rebuild (a developer's
working tree), the student is built from the recipe on first use (~5 minutes on
2 cores) and cached under
${SELFIMPROVE_CACHE:-~/.cache/selfimprove}/students/selfimprove--tiny-arith-<recipe>/
(<recipe> = the recipe hash, so a changed recipe never reuses a stale student).
That cache is written to a temporary directory and renamed into place, under a
lock file, so concurrent first uses wait for one builder and a killed build
leaves nothing half-written. SELFIMPROVE_NO_STUDENT_BUILD=1 (set by the test
suite) turns that build into an error.

Measuring a student on selfimprove-arith (per-kind pass@k) lives in arith_profile.py:
nothing here knows any environment.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import string
import tempfile
from pathlib import Path
from typing import Callable

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from ..errors import ConfigError
from .gguf_student import SMOLLM2_ID, cache_root, resolve_smollm2
from .student_check import check_model_dir

SPECIALS = ["<|pad|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>"]
CHARS = [c for c in string.printable if c not in "\t\r\x0b\x0c"]  # printable ASCII + "\n"

# ChatML. No `{%- -%}` trimming: it silently eats the "\n" after <|im_end|>.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# A literal (tests/test_cli_help.py reads it without importing torch); SMOLLM2_ID is the second.
BUILTIN_IDS = ("selfimprove/tiny-arith", "selfimprove/smollm2-135m")
assert BUILTIN_IDS[1] == SMOLLM2_ID


def build_tokenizer() -> PreTrainedTokenizerFast:
    """101 tokens: 5 specials + 96 characters; every character is one token."""
    vocab = {tok: i for i, tok in enumerate(SPECIALS + CHARS)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tk.decoder = decoders.Fuse()
    tk.add_special_tokens(SPECIALS)
    return PreTrainedTokenizerFast(
        tokenizer_object=tk,
        pad_token="<|pad|>",
        eos_token="<|im_end|>",
        unk_token="<unk>",
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
        model_max_length=256,
    )


def tiny_config(vocab_size: int = len(SPECIALS) + len(CHARS)) -> Qwen3Config:
    """hidden 128, 4 layers, 4 heads: 1.06M parameters (tied embeddings)."""
    return Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=128,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=32,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=None,
        eos_token_id=3,  # <|im_end|>
    )


def new_student(seed: int) -> tuple[Qwen3ForCausalLM, PreTrainedTokenizerFast]:
    """A randomly initialised student and its tokenizer (deterministic for `seed`)."""
    tok = build_tokenizer()
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(tiny_config(len(tok)))
    model.config._attn_implementation = "eager"  # measured faster than sdpa at this size on CPU
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok


def save_student(model, tok, path: Path) -> None:
    """HF save_pretrained of weights + tokenizer (model.safetensors, config.json, tokenizer.json, ...)."""
    model.save_pretrained(path)
    tok.save_pretrained(path)


def load_student(path: Path):
    """(model, tokenizer) from a local HF directory, in float32 on CPU."""
    path = Path(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager")
    tok = PreTrainedTokenizerFast.from_pretrained(path)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    if not tok.chat_template:
        raise ConfigError(f"model.name '{path}': its tokenizer has no chat template; the engine renders prompts with it")
    return model, tok


def render_prompt(tok, messages: list[dict]) -> list[int]:
    """Token ids of chat `messages` followed by the assistant turn header."""
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tok(text, add_special_tokens=False)["input_ids"]


# ------------------------------------------------------------------ built-in ids


def build_into_cache(final: Path, model_id: str, build: Callable[[Path], None]) -> Path:
    """`final`, built once by `build(tmp)` into a temporary sibling and renamed into place.

    Under a lock file, so concurrent first uses wait for one builder; READY (the
    done-marker) is written last, so a killed build leaves no directory that
    passes for finished, only a temporary one that the next build ignores."""
    if (final / "READY").is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f".{final.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / "READY").is_file():
            return final
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
        try:
            build(tmp)
            (tmp / "READY").write_text(model_id + "\n")
            if not (final / "READY").is_file():  # never swap out a finished student under a reader
                with contextlib.suppress(FileNotFoundError):
                    shutil.rmtree(final)  # a half-copied leftover without READY
                os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def builtin_dir(model_id: str) -> Path:
    """The CACHE directory of a built-in id for the current recipe (used only when the shipped copy is stale)."""
    from .warmup import recipe_hash

    return cache_root() / "students" / f"{model_id.replace('/', '--')}-{recipe_hash()}"


def resolve_model(name: str, log=print) -> Path:
    """A local directory for `model.name`: the directory itself, or the built-in student
    (the shipped copy; built into the cache only when the shipped copy is stale)."""
    if name == SMOLLM2_ID:
        return resolve_smollm2(log=log)
    if name in BUILTIN_IDS:
        from .shipped import shipped_dir, shipped_hash
        from .warmup import recipe_hash

        shipped, current = shipped_hash(name), recipe_hash()
        if shipped == current:
            return shipped_dir(name)
        final = builtin_dir(name)
        stale = (f"the shipped student {name} is stale (built from recipe {shipped or 'none'}, the code's warm-up "
                 f"recipe is {current}; rebuild it with `selfimprove student build` or `make student`)")
        if (final / "READY").is_file():
            log(f"{stale}; using the copy built from the recipe in {final}")
            return final
        if os.environ.get("SELFIMPROVE_NO_STUDENT_BUILD"):
            raise ConfigError(f"{shipped_dir(name) / 'recipe.json'}: {stale}; SELFIMPROVE_NO_STUDENT_BUILD is set, "
                              "so it is not built into the cache")

        def build(tmp: Path) -> None:
            from .warmup import warm_up

            log(f"{stale}; building it from the recipe into {final} (~5 min on 2 cores, once)")
            model, tok = warm_up(log=log)
            save_student(model, tok, tmp)

        return build_into_cache(final, name, build)
    path = Path(name).expanduser()
    if path.is_dir():  # one line naming the file, not transformers' frames, for a dir it cannot load
        check_model_dir(path, f"model.name '{name}'", "point it at a complete Hugging Face model dir "
                        "(config.json with model_type, the weights, tokenizer.json)", tokenizer=True)
        return path
    if "/" in name and not path.exists():
        raise ConfigError(
            f"model.name '{name}': not a local model directory and not a built-in id "
            f"({', '.join(BUILTIN_IDS)}); the CPU engine does not download models"
        )
    raise ConfigError(f"model.name '{name}': not a directory")
