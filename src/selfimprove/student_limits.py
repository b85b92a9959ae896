"""What the tool knows about a student before launching it: its context and its alphabet.

    model_context("selfimprove/tiny-arith")     -> (256, "<shipped dir>/config.json max_position_embeddings")
    check_token_budget(config, model, where)    # ConfigError naming the key that does not fit
    check_env_text(hub_env, model, seq_len)     # ConfigError when the prompts cannot fit or be encoded
    prompt_token_counts(model, system_prompt, questions)  # per row, as the engine counts them (the dataset gate)

Everything here reads config.json and tokenizer.json only (no torch), so the
orchestrator can check a config before it launches a job. Sources of the context:
a built-in id's shipped config.json, or a local Hugging Face directory's
(`max_position_embeddings`, or `n_positions` / `max_seq_len` for other families).

What is not covered: a hub id that is not on disk (`Qwen/Qwen3-0.6B`, trained by
prime-rl on a GPU box) is never downloaded here, so its context is unknown and
nothing is capped (prime-rl checks seq_len itself); a built-in student not yet
materialized in the cache is likewise unknown until its first use. The prompt
check before launch is exact only for a character-level tokenizer (one token per
character, as the built-in students have); for any other tokenizer the engine
checks the real token counts when it starts (rl/train.py) and fails in one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .stack.toml_paths import get_path

BUDGET_FILE = "completion_budget.json"  # <output_dir>/ of a CPU-engine job: the completion budgets in force
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len")
TRAIN_TOKENS_KEYS = ("orchestrator.train.sampling.max_completion_tokens", "orchestrator.train.sampling.max_tokens")
# ChatML as the built-in students render it: "<|im_start|>role\n" + content + "<|im_end|>\n" per turn,
# then "<|im_start|>assistant\n". Specials are one token each; every other character is one token.
_CHATML_TURN_OVERHEAD = 1 + 1 + 1 + 1  # <|im_start|>, "\n", <|im_end|>, "\n" (plus the role's characters)


def model_dir(model: str) -> Path | None:
    """The local directory holding `model`'s config.json, or None when it is not on disk."""
    from .rl import builtin_students  # no torch import: the registry and its entries are light

    builtin = builtin_students.find(model)
    if builtin is not None:
        return builtin.on_disk()
    d = Path(model).expanduser()
    if not d.is_dir():
        return None  # a hub id (prime-rl loads it on the GPU box)
    from .rl.student_check import check_model_dir  # no torch import either

    # Checked at bootstrap; damaged since, it is named here (one line) before any job launches on it.
    check_model_dir(d, f"run.json model {model}", "restore that model dir, or start a new run with a complete one",
                    tokenizer=False)
    return d


def model_context(model: str) -> tuple[int | None, str | None]:
    """(positions the model can attend over, where that number came from), or (None, None) if unknown."""
    d = model_dir(model)
    if d is None:
        return None, None
    try:
        config = json.loads((d / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None, None
    for key in CONTEXT_KEYS:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, f"{d / 'config.json'} {key}"
    return None, None


def char_vocabulary(model: str) -> set[str] | None:
    """The characters of a character-level tokenizer (every vocab entry one character), else None."""
    d = model_dir(model)
    if d is None or not (d / "tokenizer.json").is_file():
        return None
    try:
        tk = json.loads((d / "tokenizer.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    vocab = (tk.get("model") or {}).get("vocab")
    if (tk.get("model") or {}).get("type") != "WordLevel" or not isinstance(vocab, dict):
        return None
    specials = {t.get("content") for t in tk.get("added_tokens") or [] if isinstance(t, dict)}
    chars = {t for t in vocab if t not in specials}
    return chars if chars and all(len(t) == 1 for t in chars) else None


def _positions(seq_len: int | None, context: int | None) -> int | None:
    """What a sequence may span: the smaller of seq_len and the model's context (None if neither is known)."""
    known = [x for x in (seq_len, context) if x]
    return min(known) if known else None


def check_token_budget(config: dict[str, Any], model: str, where: str) -> None:
    """A merged training config must fit the student: seq_len <= its context, and the train
    completion budget < seq_len (room left for the prompt). ConfigError names the key."""
    context, source = model_context(model)
    seq_len = get_path(config, "seq_len")
    if context is not None and isinstance(seq_len, int) and seq_len > context:
        raise ConfigError(f"{where}: seq_len = {seq_len} is more than {model} can attend over ({context} positions, "
                          f"{source}); set seq_len <= {context}")
    limit = _positions(seq_len if isinstance(seq_len, int) else None, context)
    if limit is None:
        return
    for key in TRAIN_TOKENS_KEYS:
        tokens = get_path(config, key)
        if isinstance(tokens, int) and tokens >= limit:
            raise ConfigError(f"{where}: {key} = {tokens} leaves no room for the prompt in {limit} positions "
                              f"(seq_len / {model}'s context); set it to at most {max(1, limit // 2)}")


def rendered_prompt_chars(system_prompt: str | None, question: str) -> int:
    """Tokens of a ChatML prompt for a character-level tokenizer (exact for the built-in students)."""
    turns = ([("system", system_prompt)] if system_prompt else []) + [("user", question)]
    body = sum(_CHATML_TURN_OVERHEAD + len(role) + len(text) for role, text in turns)
    return body + 1 + len("assistant") + 1  # the generation prompt "<|im_start|>assistant\n"


def check_env_text(hub: Any, model: str, seq_len: int | None, where: str) -> None:
    """For a character-level student: every character of the env's system prompt and train samples
    must be in its vocabulary (else the student silently reads <unk>), and the longest sample
    prompt must leave room for a completion. ConfigError names what does not fit and the fix."""
    chars = char_vocabulary(model)
    if chars is None:
        return
    texts = [("the system prompt", hub.system_prompt or "")]
    texts += [(f"train sample {i}'s {field}", getattr(s, field) or "")
              for i, s in enumerate(hub.train_samples) for field in ("question", "answer")]
    for label, text in texts:
        bad = sorted({c for c in text if c not in chars})
        if bad:
            shown = ", ".join(repr(c) for c in bad[:5])
            raise ConfigError(f"{where}: {label} has characters {model} cannot encode ({shown}); its tokenizer "
                              "knows printable ASCII only: use a model whose tokenizer covers the env's text (--model DIR)")
    context, _ = model_context(model)
    limit = _positions(seq_len, context)
    if limit is None or not hub.train_samples:
        return
    longest = max(rendered_prompt_chars(hub.system_prompt, s.question) for s in hub.train_samples)
    if longest >= limit:
        raise ConfigError(f"{where}: seq_len: a train prompt of {hub.env_id} is {longest} tokens for {model}, which "
                          f"attends over {limit} positions: no room for a completion; use a model with a longer context")


def chat_prompt_lengths(tok, prompts: list[list[dict]]) -> list[int]:
    """Tokens of each chat prompt as the CPU engine renders it: the tokenizer's chat template with the
    generation prompt, no extra special tokens. Batched: one template call and one tokenizer call.
    The engine's launch check (rl/train.py longest_prompt) and the dataset gate both count with this."""
    if not prompts:
        return []
    texts = tok.apply_chat_template(prompts, tokenize=False, add_generation_prompt=True)
    return [len(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]]


def engine_tokenizer(model: str):
    """The tokenizer the CPU engine loads for `model` (rl/student.load_student: PreTrainedTokenizerFast from
    the model dir, with its chat template), or None when the model is not on disk (a hub id: prime-rl's),
    transformers is not installed here, or the dir has no usable tokenizer (the engine then names it)."""
    d = model_dir(model)
    if d is None:
        return None
    try:
        from transformers import PreTrainedTokenizerFast
        tok = PreTrainedTokenizerFast.from_pretrained(d)
    except Exception:  # noqa: BLE001  (no transformers, or a tokenizer the engine will refuse in its own words)
        return None
    return tok if tok.chat_template else None


def prompt_token_counts(model: str, system_prompt: str | None, questions: list[str]) -> tuple[list[int], str] | None:
    """(tokens of each question's prompt: system prompt + user turn + generation prompt, how they were counted),
    with the engine's tokenizer and chat template; for a character-level student without transformers, the exact
    ChatML count; None when neither is available (then the engine checks at launch)."""
    prompts = [([{"role": "system", "content": system_prompt}] if system_prompt else []) + [{"role": "user", "content": q}]
               for q in questions]
    tok = engine_tokenizer(model)
    if tok is not None:
        return chat_prompt_lengths(tok, prompts), f"{model}'s tokenizer and chat template, system prompt included"
    if char_vocabulary(model) is not None:
        return ([rendered_prompt_chars(system_prompt, q) for q in questions],
                f"{model}'s character-level ChatML count, system prompt included")
    return None


def student_positions(model: str, seq_len: int | None) -> int | None:
    """What one sequence (prompt + completion) may span for `model`: min(seq_len, its context), or None if unknown."""
    return _positions(seq_len, model_context(model)[0])


def trained_budget(output_dir: Path) -> tuple[int | None, int | None]:
    """(positions, train completion tokens in force) the CPU engine recorded for a job (completion_budget.json),
    each None when not recorded (prime-rl, or a job that never started)."""
    record = _budget_record(output_dir)
    train = record.get("train") if isinstance(record.get("train"), dict) else {}
    positions, in_force = record.get("positions"), train.get("in_force")
    return (positions if isinstance(positions, int) else None, in_force if isinstance(in_force, int) else None)


def _budget_record(output_dir: Path) -> dict:
    try:
        record = json.loads((Path(output_dir) / BUDGET_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # missing (prime-rl writes none), torn or not UTF-8: nothing to report
        return {}
    return record if isinstance(record, dict) else {}


def answers_over_budget(output_dir: Path) -> list[str]:
    """One phrase per split some of whose reference answers alone are longer than its completion budget
    in force ("3 eval answers are longer than the 89-token budget"): those rows cannot be answered in full."""
    record = _budget_record(output_dir)
    over = record.get("answers_longer_than_budget")
    out = []
    for split in ("train", "eval"):
        n, b = (over or {}).get(split) if isinstance(over, dict) else None, record.get(split)
        if isinstance(n, int) and n > 0 and isinstance(b, dict):
            out.append(f"{n} {split} answers are longer than the {b.get('in_force')}-token budget")
    return out


def completion_budget_cuts(output_dir: Path) -> list[str]:
    """One line per split whose completion budget the engine cut below what the config asked
    (`<output_dir>/completion_budget.json`, written by the CPU engine at start), e.g. "eval
    max_completion_tokens 2048 -> 43 in force (the longest eval prompt takes 213 of 256 positions)".
    Empty when nothing was cut, or for an engine that writes no such file (prime-rl)."""
    record = _budget_record(output_dir)
    out = []
    for split in ("train", "eval"):
        b = record.get(split)
        if not isinstance(b, dict) or not isinstance(b.get("in_force"), int):
            continue
        asked = b.get("requested")  # None: the config asks for whatever room the prompt leaves (no cut)
        if isinstance(asked, int) and b["in_force"] < asked:
            out.append(f"{split} max_completion_tokens {asked} -> {b['in_force']} in force (the longest {split} "
                       f"prompt takes {b.get('longest_prompt')} of {record.get('positions')} positions)")
    return out
