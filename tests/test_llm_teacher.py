"""The built-in LLM teacher (`run --teacher llm:MODEL`) against a replay server (tests/llm_replay.py):
a whole run to finalize with the fake engine, no key and no eval content in any request or in the
run dir, replays instead of paying twice, retries on 429/5xx, exit 75 when unreachable."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llm_replay import SENTINEL, ReplayServer, recorded, seal_eval_with_sentinels
from loop_helpers import tree_digest
from selfimprove.errors import TeacherActionNeeded, TeacherUnreachable
from selfimprove.llm_teacher import ApiSettings, LlmTeacher
from selfimprove.llm_teacher.prompt import TEACHER_SECTIONS, teacher_instructions
from selfimprove.llm_teacher.reply import parse_reply
from selfimprove.phases.iterate import iterate
from selfimprove.rundir import RunDir
from selfimprove.teacher import make_context

KEY_ENV = "SELFIMPROVE_TEST_LLM_KEY"
KEY = "sk-test-0123456789abcdefSECRET"


def cli(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    import os
    return subprocess.run([sys.executable, "-m", "selfimprove", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, KEY_ENV: KEY, **(env_extra or {})})


def llm_args(server_url: str, *extra: str) -> list[str]:
    return ["--teacher", "llm:replay-model", "--teacher-base-url", server_url, "--teacher-api-key-env", KEY_ENV, *extra]


def test_instructions_are_skill_md_sections() -> None:
    text = teacher_instructions()
    for _, titles in TEACHER_SECTIONS:
        for title in titles:
            assert f"## {title}\n" in text
    assert "Eval rows are sealed" in text and "## Phase 4" not in text


def test_reply_parsing_names_what_is_missing() -> None:
    reply, problems = parse_reply(recorded(), iteration=1)
    assert problems == [] and reply.files["gen_dataset.py"].startswith('"""Rows for the six')  # the fence is unwrapped
    _, problems = parse_reply('<file name="gen_dataset.py">x</file><file name="run.json">{}</file>', iteration=2)
    assert any("run.json" in p for p in problems) and any("weakness_report.md" in p for p in problems)
    assert any("worked_prev" in p for p in problems)


def test_run_reaches_finalize_against_the_replay_server(run: RunDir) -> None:
    seal_eval_with_sentinels(run.root)
    with ReplayServer(recorded()) as server:
        proc = cli("run", "--run-dir", str(run.root), *llm_args(server.url), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    cfg = json.loads(run.run_json.read_text())
    assert cfg["status"] == "finalized" and cfg["end_reason"] == "max_iters_reached"
    assert [r["arm"] for r in json.loads(run.metrics_json.read_text())["iters"]][:2] == ["iter_0", "iter_1"]
    assert len(server.requests) == 1 and cfg["teacher_tokens"]["iter_1"] > 0
    transcripts = sorted((run.iter(1).dir / "llm_teacher").glob("*.json"))
    assert len(transcripts) == 1 and json.loads(transcripts[0].read_text())["status"] == "written"
    for request in server.requests:
        body = request["body"]
        assert KEY not in body and SENTINEL not in body
        assert "Rules you never break" in body and "failures.jsonl" in body
        assert request["headers"].get("authorization") == f"Bearer {KEY}"  # the key travels in the header only
    for path in run.root.rglob("*"):
        if path.is_file() and SENTINEL not in path.name and "eval" not in path.name:
            assert KEY.encode() not in path.read_bytes(), path
    pad = (run.root / "scratchpad.md").read_text()
    assert "drop one of two quantities before adding" in pad and "_teacher: what the failed" not in pad
    tokens = f"LLM teacher tokens (prompt + completion, paid requests only): iter_1 {cfg['teacher_tokens']['iter_1']}"
    assert tokens in pad and json.loads(proc.stdout)["teacher_tokens"] == cfg["teacher_tokens"]  # summary and --json
    status = cli("status", "--run-dir", str(run.root))
    assert f"teacher llm:replay-model | tokens (prompt + completion): iter_1 {cfg['teacher_tokens']['iter_1']}" \
        in status.stdout, status.stdout + status.stderr


def test_gate_failures_go_back_to_the_model_up_to_the_cap(run: RunDir) -> None:
    """Useless replies (a generator writing 5 rows per bucket) end in one line after the run loop's
    cap, each fix request carrying the gate report; re-running resumes (and asks again)."""
    bad = recorded().replace("PER_BUCKET = 100", "PER_BUCKET = 5")
    with ReplayServer(bad) as server:
        proc = cli("run", "--run-dir", str(run.root), *llm_args(server.url))
        assert proc.returncode == 4 and "could not produce data that passes the gates in 4 attempts" in proc.stderr
        assert len(server.requests) == 4
        for k, request in enumerate(server.requests[1:], start=2):
            messages = json.loads(request["body"])["messages"]
            assert len(messages) == 4 and "rows" in messages[-1]["content"]  # each fix: opening, reply, gate report
            assert messages[:2] == json.loads(server.requests[0]["body"])["messages"]
        again = cli("run", "--run-dir", str(run.root), *llm_args(server.url))
    assert again.returncode == 4 and len(server.requests) == 8
    assert len(list((run.iter(1).dir / "llm_teacher").glob("*.json"))) == 8


def _teacher_stop(run: RunDir) -> None:
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)


def _teacher(url: str, **kw) -> LlmTeacher:
    return LlmTeacher(ApiSettings(model="replay-model", base_url=url, api_key_env=KEY_ENV, **kw))


def test_a_second_write_replays_the_saved_exchange(run: RunDir, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    _teacher_stop(run)
    ctx = make_context(run, 1)
    with ReplayServer(recorded()) as server:
        _teacher(server.url).write(ctx)
        first = (run.iter(1).dir / "gen_dataset.py").read_text()
        _teacher(server.url).write(make_context(run, 1))  # a resumed run asks the same question
    assert len(server.requests) == 1 and (run.iter(1).dir / "gen_dataset.py").read_text() == first


def test_gate_feedback_continues_the_conversation(run: RunDir, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    _teacher_stop(run)
    with ReplayServer(recorded()) as server:
        _teacher(server.url).write(make_context(run, 1))
        _teacher(server.url).write(make_context(run, 1, feedback="dataset gate: hard_share 0.1 < 0.4"))
    second = json.loads(server.requests[1]["body"])["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert "hard_share 0.1 < 0.4" in second[-1]["content"]


def test_429_and_5xx_are_retried(run: RunDir, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    _teacher_stop(run)
    with ReplayServer(recorded(), script=[429, 503]) as server:
        _teacher(server.url, retries=2).write(make_context(run, 1))
    assert len(server.requests) == 3 and (run.iter(1).dir / "llm_teacher").is_dir()


def test_unreachable_is_exit_75_with_nothing_written(run: RunDir) -> None:
    _teacher_stop(run)
    before = tree_digest(run.iter(1).dir)
    with ReplayServer(503) as server:
        proc = cli("run", "--run-dir", str(run.root), *llm_args(server.url, "--teacher-retries", "1"))
    assert proc.returncode == 75, proc.stderr[-2000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert "unreachable after 1 retries" in line and KEY not in proc.stderr + proc.stdout
    assert len(server.requests) == 2 and tree_digest(run.iter(1).dir) == before


def test_refused_connection_is_unreachable(run: RunDir, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    _teacher_stop(run)
    with ReplayServer(recorded()) as server:
        url = server.url  # closed on exit: nothing listens there any more
    with pytest.raises(TeacherUnreachable, match="APIConnectionError"):
        _teacher(url, retries=0).write(make_context(run, 1))
    assert not (run.iter(1).dir / "llm_teacher").exists()


def test_token_cap_stops_before_a_request(run: RunDir, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    _teacher_stop(run)
    with ReplayServer(recorded()) as server:
        _teacher(server.url, max_tokens=10).write(make_context(run, 1))  # under the cap before the first request
        with pytest.raises(Exception, match="--teacher-max-tokens 10"):
            _teacher(server.url, max_tokens=10).write(make_context(run, 1, feedback="gate: fix it"))
    assert len(server.requests) == 1
    assert json.loads(run.run_json.read_text())["teacher_tokens"]["iter_1"] > 10


def test_llm_flags_without_an_llm_teacher_are_refused(run: RunDir) -> None:
    proc = cli("run", "--run-dir", str(run.root), "--teacher", "examples/minimal_teacher.py:MinimalTeacher",
               "--teacher-max-tokens", "5")
    assert proc.returncode == 2 and "--teacher-max-tokens: for --teacher llm:MODEL only" in proc.stderr


def test_iterate_with_the_llm_teacher_does_one_iteration(run: RunDir) -> None:
    with ReplayServer(recorded()) as server:
        proc = cli("iterate", "--run-dir", str(run.root), *llm_args(server.url), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    arms = [r["arm"] for r in json.loads(run.metrics_json.read_text())["iters"]]
    assert arms == ["iter_0", "iter_1"] and len(server.requests) == 1


def test_llm_flags_on_iterate_without_a_teacher_are_refused(run: RunDir) -> None:
    proc = cli("iterate", "--run-dir", str(run.root), "--teacher-retries", "2")
    assert proc.returncode == 2 and "--teacher-retries: for --teacher llm:MODEL only" in proc.stderr


def test_a_refused_key_is_one_line_without_the_key(run: RunDir) -> None:
    with ReplayServer(401) as server:  # its error message echoes the Authorization header
        proc = cli("run", "--run-dir", str(run.root), *llm_args(server.url))
    assert proc.returncode == 1 and "refused with HTTP 401" in proc.stderr and "--teacher-api-key-env" in proc.stderr
    assert len(server.requests) == 1 and KEY not in proc.stderr + proc.stdout and KEY[:15] not in proc.stderr
    assert not any(KEY.encode() in p.read_bytes() for p in run.root.rglob("*") if p.is_file())


def test_the_default_url_needs_the_key_variable(run: RunDir) -> None:
    proc = cli("run", "--run-dir", str(run.root), "--teacher", "llm:gpt-4.1", "--teacher-api-key-env", "NO_SUCH_KEY_VAR",
               env_extra={"OPENAI_BASE_URL": "", "SELFIMPROVE_TEACHER_BASE_URL": ""})
    assert proc.returncode == 2 and "$NO_SUCH_KEY_VAR is empty or not set" in proc.stderr


def test_run_dir_alone_resumes_with_the_recorded_teacher(run: RunDir) -> None:
    """`run --run-dir R` without --teacher reuses run.json's teacher and its flags (never the key);
    a flag typed again overrides its recorded value."""
    with ReplayServer(503) as down:
        first = cli("run", "--run-dir", str(run.root), *llm_args(down.url, "--teacher-retries", "1",
                                                                 "--teacher-input-chars", "55000"))
    assert first.returncode == 75
    messages = json.loads(down.requests[0]["body"])["messages"]
    assert sum(len(m["content"]) for m in messages) <= 55_000  # the opening request fits the flag's budget
    recorded = json.loads(run.run_json.read_text())["teacher"]
    assert recorded["settings"]["teacher_input_chars"] == 55_000  # recorded like the other --teacher-* flags
    assert recorded["spec"] == "llm:replay-model" and recorded["settings"]["teacher_api_key_env"] == KEY_ENV
    assert recorded["settings"]["teacher_retries"] == 1 and KEY not in json.dumps(recorded)
    with ReplayServer(401) as other:
        again = cli("run", "--run-dir", str(run.root), "--teacher-base-url", other.url)
    assert again.returncode == 1 and "llm:replay-model at " + other.url in again.stderr and len(other.requests) == 1
