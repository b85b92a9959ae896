"""The built-in LLM teacher against a real OpenAI-compatible server on this machine:
`transformers serve` (the transformers[serving] extra, in the dev extra) on the built-in student
selfimprove/tiny-arith, loaded from its shipped files with the hub offline.

The student is a 1M-parameter arithmetic model: its replies are digits and tags, never the
files the tool needs. That is the point: the whole failure path runs over real HTTP, with the
SDK's real request and response objects, real token counts and a real reply cap (finish_reason
"length"): every reply is unusable, the teacher says so and asks again, and after the cap the
run ends in one line with exit 1; re-running the same command resumes at that iteration (here
it meets the token cap at once: one line again). What a good reply does (files written, the
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
# The flag's floor, not the default 60,000: the character-level student prefills every request's whole prompt
# (one token per character), whose cost grows with its square; at 60,000 this test took 11 min of the suite.
INPUT_CHARS = 50_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory):
    """(base URL, model name) of `transformers serve` on a copy of the shipped tiny-arith student."""
    from selfimprove_arith.student import resolve

    model = tmp_path_factory.mktemp("served") / "tiny-arith"
    shutil.copytree(resolve(log=lambda *_: None), model)
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
