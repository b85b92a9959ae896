"""The CPU engine samples with a key/value cache written in place (rl/policy.py _PreallocatedLayer) instead of
transformers' DynamicCache, which concatenates the whole cache on every token (42% of sampling time on a
reasoning-gym student). The change must not change a single sampled token: the README's figures and every
recorded run depend on the draws."""

from __future__ import annotations

import random

import pytest
import torch
from transformers.cache_utils import DynamicCache

from selfimprove.rl import policy
from selfimprove.rl.student import build_tokenizer, new_student, render_prompt
from selfimprove.rl.student_build_train import sized_model


def _concatenating_cache(model, prefix, batch, capacity):
    """The cache the engine sampled with before: the shared prefix's DynamicCache, grown by concatenation."""
    return policy._prefix_cache(model, prefix, batch) or DynamicCache()


def _sample(model, tok, prompts, *, max_new, temperature, eos_id=None):
    model.eval()
    return policy.generate(model, prompts, max_new_tokens=max_new, temperature=temperature,
                           eos_id=tok.eos_token_id if eos_id is None else eos_id, pad_id=tok.pad_token_id,
                           generator=torch.Generator().manual_seed(3))


def _both(monkeypatch, model, tok, prompts, **kw):
    in_place = _sample(model, tok, prompts, **kw)
    with monkeypatch.context() as m:
        m.setattr(policy, "_sampling_cache", _concatenating_cache)
        concatenated = _sample(model, tok, prompts, **kw)
    return in_place, concatenated


def _chat(tok, text: str) -> list[int]:
    return render_prompt(tok, [{"role": "user", "content": text}])


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_long_prompts_sample_the_same_tokens_as_the_concatenating_cache(monkeypatch, temperature):
    """Prompts of 60-140 tokens after the shared prefix (as reasoning-gym's), 8 samples each, to the budget."""
    tok = build_tokenizer()
    model = sized_model(tok, 512, seed=0)
    rng = random.Random(0)
    words = ["spell", "backward", "count", "letters", "sentence", "reorder", "answer", "word"]
    prompts = [_chat(tok, " ".join(rng.choice(words) for _ in range(rng.randint(10, 25)))) for _ in range(6)]
    prompts = [p for p in prompts for _ in range(8)]
    in_place, concatenated = _both(monkeypatch, model, tok, prompts, max_new=40, temperature=temperature)
    assert in_place == concatenated
    assert max(len(c) for c in in_place[0]) == 40  # random weights ramble: the cache fills to its capacity


def test_rows_with_no_shared_prefix_and_eos_stops(monkeypatch):
    """No common prefix (the cache starts empty) and rows that end early (EOS) on the tiny student."""
    model, tok = new_student(0)
    prompts = [[tok.bos_token_id or 1, *_chat(tok, f"{a}+{b}=")] if a % 2 else _chat(tok, f"{a}*{b}=")
               for a in range(1, 9) for b in range(3)]
    (comps, trunc), concatenated = _both(monkeypatch, model, tok, prompts, max_new=12, temperature=1.0)
    assert (comps, trunc) == concatenated
    assert policy.common_prefix_len(prompts) == 0


def test_the_cache_holds_the_prefix_and_every_written_token():
    tok = build_tokenizer()
    model = sized_model(tok, 256, seed=1).eval()
    prompts = [_chat(tok, "abc"), _chat(tok, "abd")]
    p = policy.common_prefix_len(prompts)
    with torch.no_grad():
        cache = policy._sampling_cache(model, prompts[0][:p], 2, capacity=p + 5)
        layer = cache.layers[0]
        assert layer.get_seq_length() == p and layer.keys.shape[0] == 2
        k, v = torch.randn(2, layer.keys.shape[1], 5, layer.keys.shape[-1]), torch.randn(2, layer.keys.shape[1], 5, layer.keys.shape[-1])
        keys, values = layer.update(k, v)
    assert keys.shape[-2] == p + 5 and torch.equal(keys[:, :, p:], k) and torch.equal(values[:, :, p:], v)
    assert torch.equal(keys[0, :, :p], keys[1, :, :p])  # the broadcast prefix, copied once per row
