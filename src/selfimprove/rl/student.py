"""Students of the CPU engine: loading, saving and prompting any local Hugging Face
model, resolving `model.name`, and a tiny architecture (a Qwen3 causal LM of ~1M parameters
with a character-level tokenizer that needs no download): the shipped built-in student's,
and what tests build throwaway models with.

`model.name` in a config is either a local Hugging Face directory (anything
`AutoModelForCausalLM.from_pretrained` reads, with a tokenizer that has a chat
template) or a built-in id from the registry (builtin_students.py), which says how
that id becomes a local directory: shipped weights, or a copy built or converted
once into the cache (student_cache.py). Nothing here knows any environment.
"""

from __future__ import annotations

import string
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from ..errors import ConfigError
from . import builtin_students
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


# The architecture's numbers: everything about the model that decides its weights. The warm-up
# recipe hashes this dict (not Qwen3Config.to_dict(), which also carries the transformers version
# and that release's defaults: a new transformers would then call an unchanged student stale).
TINY_ARCH = {
    "hidden_size": 128,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 32,
    "max_position_embeddings": 256,
    "tie_word_embeddings": True,
    "pad_token_id": 0,
    "bos_token_id": None,
    "eos_token_id": 3,  # <|im_end|>
}


def tiny_config(vocab_size: int = len(SPECIALS) + len(CHARS)) -> Qwen3Config:
    """hidden 128, 4 layers, 4 heads: 1.06M parameters (tied embeddings)."""
    return Qwen3Config(vocab_size=vocab_size, **TINY_ARCH)


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


def resolve_model(name: str, log=print) -> Path:
    """A local directory for `model.name`: the directory itself, or a built-in student's
    (its registry entry resolves it: shipped, or built into the cache on first use)."""
    builtin = builtin_students.find(name)
    if builtin is not None:
        return builtin.resolve(log)
    path = Path(name).expanduser()
    if path.is_dir():  # one line naming the file, not transformers' frames, for a dir it cannot load
        check_model_dir(path, f"model.name '{name}'", "point it at a complete Hugging Face model dir "
                        "(config.json with model_type, the weights, tokenizer.json)", tokenizer=True)
        return path
    if "/" in name and not path.exists():
        raise ConfigError(
            f"model.name '{name}': not a local model directory and not a built-in id "
            f"({', '.join(builtin_students.ids())}); the CPU engine does not download models"
        )
    raise ConfigError(f"model.name '{name}': not a directory")
