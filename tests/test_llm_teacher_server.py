"""The built-in LLM teacher against a real OpenAI-compatible server on this machine:
`transformers serve` (the transformers[serving] extra, in the dev extra) on a tiny Qwen3 made here
with the hub offline: random weights (seeded) and a byte-level BPE tokenizer fitted to the skill's
own text, so a 50,000-character request is ~15k tokens to prefill. (The built-in student's character
tokenizer made it 50k tokens, whose attention cost grows with the square: 6.5 min of the suite.)

Its replies are random tokens, never the files the tool needs. That is the point: the whole
failure path runs over real HTTP, with the SDK's real request and response objects, real token
counts and a real reply cap (finish_reason "length"): every reply is unusable, the teacher says
so and asks again, and after the cap the run ends in one line with exit 1; re-running the same
command resumes at that iteration (here it meets the token cap at once: one line again). What a good reply does (files written, the
gates, gate feedback, finalize) is proven against the replay server in test_llm_teacher.py;
what a capable model writes, only a hosted or large local model can show.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from llm_replay import SENTINEL, seal_eval_with_sentinels
from loop_helpers import tree_digest
from selfimprove.rundir import RunDir
from selfimprove.teacher import MAX_TEACHER_ATTEMPTS

pytestmark = pytest.mark.slow

REPLY_TOKENS = 32  # per request: keeps each reply (and the test) short, and exercises the reply cap
INPUT_CHARS = 50_000  # the flag's floor, not the default 60,000: the server prefills every request whole


def _served_model(out: Path) -> Path:
    """A Qwen3 small enough to prefill ~15k tokens in seconds: 2 layers of width 64, random weights (seed 0),
    a byte-level BPE (every character encodes) fitted to SKILL.md and its reference, the text of every
    opening request, with the built-in student's chat template and special tokens."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    from selfimprove.skill import SKILL_FILES, packaged_text
    from selfimprove_arith.student import resolve

    out.mkdir(parents=True)
    specials = ["<|pad|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([packaged_text(name) for name in SKILL_FILES], trainers.BpeTrainer(
        vocab_size=4096, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(out / "tokenizer.json"))
    student = Path(resolve(log=lambda *_: None))
    shutil.copy(student / "chat_template.jinja", out / "chat_template.jinja")
    (out / "tokenizer_config.json").write_text(json.dumps({
        "backend": "tokenizers", "eos_token": "<|im_end|>", "pad_token": "<|pad|>", "model_max_length": 65536,
        "padding_side": "left", "tokenizer_class": "TokenizersBackend"}))
    pad, eos = tok.token_to_id("<|pad|>"), tok.token_to_id("<|im_end|>")
    config = Qwen3Config(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, head_dim=32, max_position_embeddings=65536,
                         tie_word_embeddings=True, pad_token_id=pad, eos_token_id=eos, bos_token_id=None)
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).save_pretrained(out)
    GenerationConfig(eos_token_id=eos, pad_token_id=pad).save_pretrained(out)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory):
    """(base URL, model name) of `transformers serve` on the tiny BPE model of `_served_model`."""
    model = _served_model(tmp_path_factory.mktemp("served") / "tiny-bpe")
    cli = Path(sys.executable).with_name("transformers")
    assert cli.is_file(), f"{cli}: missing; the dev extra installs transformers[serving]"
    port = _free_port()
    log = model.parent / "serve.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with log.open("w") as out:
        proc = subprocess.Popen([str(cli), "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
                                 "--device", "cpu", "--default-seed", "0"], stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, f"transformers serve exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5) as response:
                    if str(model) in response.read().decode():
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"transformers serve not up after 180 s:\n{log.read_text()[-3000:]}"
            time.sleep(1)
        yield url, str(model)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _run(run: RunDir, url: str, model: str, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SELFIMPROVE_TEACHER_"))}
    return subprocess.run([sys.executable, "-m", "selfimprove", "run", "--run-dir", str(run.root),
                           "--teacher", f"llm:{model}", "--teacher-base-url", url,
                           "--teacher-max-reply-tokens", str(REPLY_TOKENS), "--teacher-input-chars", str(INPUT_CHARS),
                           *extra],
                          capture_output=True, text=True, timeout=1200, env=env)


def test_useless_replies_from_a_real_server_end_in_one_line_and_a_rerun_resumes(run: RunDir, local_server) -> None:
    url, model = local_server
    seal_eval_with_sentinels(run.root)
    iter0 = tree_digest(run.iter(0).dir)
    transcripts = run.iter(1).dir / "llm_teacher"

    first = _run(run, url, model)
    assert first.returncode == 1, first.stderr[-3000:]
    error = [line for line in first.stderr.splitlines() if line.startswith("error:")]  # the rest: phase lines
    assert len(error) == 1 and first.stderr.strip().endswith(error[0]), first.stderr[-3000:]
    assert "Traceback" not in first.stderr
    assert f"replies lacked what the tool needs {MAX_TEACHER_ATTEMPTS} times" in error[0]
    assert "cut at the token limit (--teacher-max-reply-tokens" in error[0] or "no <file" in error[0]

    exchanges = [json.loads(p.read_text()) for p in sorted(transcripts.glob("*.json"))]
    assert len(exchanges) == MAX_TEACHER_ATTEMPTS and {e["status"] for e in exchanges} == {"unusable"}
    for k, exchange in enumerate(exchanges):
        assert exchange["request"]["max_completion_tokens"] == REPLY_TOKENS
        assert exchange["usage"]["completion_tokens"] <= REPLY_TOKENS < exchange["usage"]["prompt_tokens"]
        assert len(exchange["request"]["messages"]) == (4 if k else 2)  # a retry: opening, bad reply, what it lacked
        body = json.dumps(exchange["request"])
        assert SENTINEL not in body and "Rules you never break" in body
    cfg = json.loads(run.run_json.read_text())
    assert cfg["teacher_tokens"]["iter_1"] == sum(e["usage"]["total_tokens"] for e in exchanges)
    assert cfg["teacher"]["spec"] == f"llm:{model}" and "unused" not in run.run_json.read_text()
    assert not (run.iter(1).dir / "dataset.jsonl").exists() and tree_digest(run.iter(0).dir) == iter0

    # The same command again, with the token cap at what iteration 1 has used: the run resumes at
    # iter_1's teacher stop (nothing before it is redone, no reply replayed) and stops at the cap
    # before any request, in one line. (That a re-run asks afresh instead of replaying an unusable
    # reply: test_llm_teacher.py, against the replay server, where a request costs nothing.)
    used = cfg["teacher_tokens"]["iter_1"]
    again = _run(run, url, model, "--teacher-max-tokens", str(used))
    assert again.returncode == 1, again.stderr[-3000:]
    error = [line for line in again.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and again.stderr.strip().endswith(error[0]) and "Traceback" not in again.stderr
    assert f"used {used} tokens of this iteration's --teacher-max-tokens {used}; raise the cap and re-run" in error[0]
    assert "teacher: iter_1 (write)" in again.stderr
    assert len(list(transcripts.glob("*.json"))) == MAX_TEACHER_ATTEMPTS
    assert json.loads(run.run_json.read_text())["teacher_tokens"]["iter_1"] == used
    assert tree_digest(run.iter(0).dir) == iter0
    for path in run.root.rglob("*"):
        if path.is_file() and "eval" not in path.name:
            assert SENTINEL.encode() not in path.read_bytes(), path
