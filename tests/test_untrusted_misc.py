"""Issue 41's lesser items (Why 9 and 11): what a run dir or a teacher's code cannot make the tool do, and
advice that works. Cheap: no training, one shared iter_0-done run where a command needs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from selfimprove.commands._common import cli_errors
from selfimprove.errors import TeacherError
from selfimprove.rundir import RunDir


def _close(run_dir: Path) -> None:
    cfg = json.loads((run_dir / "run.json").read_text())
    cfg.update(status="finalized", end_ts=cfg["start_ts"] + 60)
    (run_dir / "run.json").write_text(json.dumps(cfg))


def _bug(run_dir: Path, exc: BaseException) -> int:
    @cli_errors
    def command(run_dir: Path) -> None:
        raise exc

    with pytest.raises(typer.Exit) as e:
        command(run_dir=run_dir)
    return e.value.exit_code


def test_errors_log_is_never_written_through_a_planted_symlink(tmp_path: Path, capsys) -> None:
    run_dir, target = tmp_path / "run", tmp_path / "bashrc"
    run_dir.mkdir()
    target.write_text("mine\n")
    (run_dir / "errors.log").symlink_to(target)
    assert _bug(run_dir, ZeroDivisionError("boom")) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert target.read_text() == "mine\n" and "unexpected ZeroDivisionError: boom" in err
    assert "selfimprove-error-" in err  # the traceback went to the temp file the line names
    assert "re-run the same command" not in err  # a bug is met again by the same command: no resume advice


def test_a_closed_run_gets_no_errors_log_and_a_broken_pipe_no_log_at_all(new_run, capsys) -> None:
    run_dir = new_run()
    _close(run_dir)
    before = sorted(p.name for p in run_dir.iterdir())
    assert _bug(run_dir, ZeroDivisionError("boom")) == 1
    assert "selfimprove-error-" in capsys.readouterr().err
    assert _bug(run_dir, BrokenPipeError(32, "Broken pipe")) == 141  # `weaknesses | head -1`
    assert capsys.readouterr().err == "" and sorted(p.name for p in run_dir.iterdir()) == before


def test_weaknesses_into_head_on_a_finalized_run_writes_nothing(run: RunDir) -> None:
    """A real pipe whose reader is gone (as after `| head -1`): closed here before the command writes, so
    its first write fails, whatever the table's size."""
    _close(run.root)
    before = sorted(p.name for p in run.root.iterdir())
    proc = subprocess.Popen([sys.executable, "-m", "selfimprove", "weaknesses", "--run-dir", str(run.root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait() == 141 and err == "", err
    assert sorted(p.name for p in run.root.iterdir()) == before  # no errors.log


def test_weaknesses_past_the_end_names_iterations_that_exist_and_that_works(run: RunDir, cli) -> None:
    """`--iter 99` said to wait for iter_98, which a 2-iteration run never makes."""
    res = cli("weaknesses", "--run-dir", run.root, "--iter", "99")  # both sources: previous reads iter_98
    err = " ".join(res.stderr.split())
    assert res.exit_code == 5 and "until it has" not in err, err
    assert "no iteration has generated rows yet: use --source real, or --iter 2 once" in err, err
    assert cli("weaknesses", "--run-dir", run.root, "--iter", "99", "--source", "real").exit_code == 0  # the advice
    res = cli("weaknesses", "--run-dir", run.root, "--iter", "2")  # iter_1 is next: iterate makes it
    assert "run `selfimprove iterate --run-dir" in " ".join(res.stderr.split())


def test_a_group_by_function_calling_sys_exit_is_one_line(tmp_path: Path) -> None:
    from selfimprove.commands.weaknesses import load_group_fn

    f = tmp_path / "groups.py"
    f.write_text("import sys\ndef group(q):\n    sys.exit(3)\n")
    with pytest.raises(TeacherError, match=r"group\(\) raised SystemExit: 3 .*fix the function"):
        load_group_fn(f"{f}:group")("what is 2+2?")


def test_a_hand_made_iter_0001_is_not_iter_1_again(tmp_path: Path) -> None:
    for name in ("iter_0", "iter_1", "iter_0001", "iter_01", "iter_2"):
        (tmp_path / name).mkdir()
    assert RunDir(tmp_path).iter_indices() == [0, 1, 2]


@pytest.mark.parametrize("name, value", [("teacher_input_chars", -5), ("teacher_input_chars", 1),
                                         ("teacher_timeout", "abc"), ("teacher_retries", True)])
def test_a_recorded_teacher_setting_of_the_wrong_type_or_range_is_named(new_run, cli, monkeypatch, name, value) -> None:
    """It was used as it was (-5 input characters) or failed in the SDK as 'fix the teacher'."""
    run_dir = new_run()
    cfg = json.loads((run_dir / "run.json").read_text())
    cfg["teacher"] = {"spec": "llm:m", "settings": {name: value}}
    (run_dir / "run.json").write_text(json.dumps(cfg))
    res = cli("run", "--run-dir", run_dir)
    err = " ".join(res.stderr.split())
    flag = "--" + name.replace("_", "-")
    assert res.exit_code == 1 and f"{run_dir / 'run.json'}: teacher.settings.{name} = " in err, err
    assert f"--teacher llm:m {flag} VALUE" in err and "fix the teacher" not in err
    # the advice: the flag typed replaces the recorded value (here the next check is the API key's, not this one)
    good = {"teacher_input_chars": "60000", "teacher_timeout": "30", "teacher_retries": "2"}[name]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    res = cli("run", "--run-dir", run_dir, "--teacher", "llm:m", flag, good)
    assert "teacher.settings" not in res.stderr and "OPENAI_API_KEY" in res.stderr, res.stderr


def test_an_unusable_reply_is_sent_back_clipped(tmp_path: Path, monkeypatch) -> None:
    """A 10 MB unusable reply went back whole on every re-ask (paid each time); now head and tail."""
    import selfimprove.llm_teacher as llm
    from selfimprove.teacher import MAX_TEACHER_ATTEMPTS, TeacherContext

    sent = []

    def chat(settings, messages, transcripts):
        sent.append(messages)
        return {"digest": str(len(sent)), "reply": "x" * 10_000_000, "finish_reason": "stop"}

    monkeypatch.setattr(llm, "chat", chat)
    monkeypatch.setattr(llm, "_record_tokens", lambda ctx, t: None)
    monkeypatch.setattr(llm.Transcripts, "mark", lambda self, digest, status: None)
    monkeypatch.setattr(llm.LlmTeacher, "_conversation", lambda self, ctx, t: [{"role": "system", "content": "s"},
                                                                            {"role": "user", "content": "u"}])
    ctx = TeacherContext(iteration=1, iter_dir=tmp_path, run_dir=tmp_path, failures_path=tmp_path / "f.jsonl",
                         analysis={}, hub_env={})
    teacher = llm.LlmTeacher(llm.ApiSettings(model="m", base_url="http://x/v1", api_key_env="K"))
    with pytest.raises(TeacherError, match="lacked what the tool needs"):
        teacher.write(ctx)
    assert len(sent) == MAX_TEACHER_ATTEMPTS
    for messages in sent[1:]:
        assert len(messages[2]["content"]) < llm.REASK_REPLY_CHARS + 100 and "characters of this reply cut" in messages[2]["content"]


@pytest.mark.parametrize("status", ["aborted", "finalized"])
def test_the_report_names_no_phase_command_a_closed_run_refuses(new_run, cli, status) -> None:
    """The 'not in this report yet' box advised introspect/baseline on aborted and finalized runs: exit 5."""
    from selfimprove.report.collect import collect

    run_dir = new_run()
    cfg = json.loads((run_dir / "run.json").read_text())
    cfg.update(status=status, end_ts=cfg["start_ts"] + 60, reason="the env would not load")
    (run_dir / "run.json").write_text(json.dumps(cfg))
    missing = collect(RunDir(run_dir), None)["missing"]
    assert any("introspect has not run" in m for m in missing)
    assert not any("`selfimprove introspect" in m or "`selfimprove baseline" in m for m in missing), missing
    assert f"the run {'was aborted (the env would not load)' if status == 'aborted' else 'is finalized'}" in missing[-1]
    assert cli("introspect", "--run-dir", run_dir).exit_code == 5  # what the old advice ran into


def test_a_note_that_is_not_utf8_is_a_usage_line_and_the_fixed_one_is_logged(new_run) -> None:
    """It ended in 'unexpected UnicodeEncodeError ... re-run the same command to resume' (it never would)."""
    run_dir = new_run()
    cmd = [sys.executable, "-m", "selfimprove", "note", "--run-dir", str(run_dir), "--compact-failed"]
    bad = subprocess.run([*cmd, b"timed out \xff".decode("utf-8", "surrogateescape")], capture_output=True, text=True)
    assert bad.returncode == 2 and "--compact-failed: not UTF-8 text (character 11" in bad.stderr, bad.stderr
    assert "re-run the same command" not in bad.stderr and not (run_dir / "errors.log").exists()
    good = subprocess.run([*cmd, "timed out"], capture_output=True, text=True)  # the advice: UTF-8
    assert good.returncode == 0 and json.loads((run_dir / "run.json").read_text())["compact_warnings"] == ["timed out"]


@pytest.mark.parametrize("content_type", ["application/json", "text/html"])
def test_an_html_body_from_the_llm_server_names_the_server_not_the_teacher(content_type) -> None:
    """A proxy's error page under a JSON content type escaped the SDK as JSONDecodeError, which read as 'the
    teacher's write() raised ...; fix the teacher and re-run `selfimprove run`'."""
    import http.server
    import threading

    pytest.importorskip("openai")
    from selfimprove.llm_teacher.api import ApiSettings, _send

    class Html(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = b"<html><body>502 Bad Gateway</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Html)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/v1"
    try:
        with pytest.raises(TeacherError) as e:
            _send(ApiSettings(model="m", base_url=url, api_key_env="K", retries=0),
                  {"model": "m", "messages": [{"role": "user", "content": "x"}]}, "k")
    finally:
        server.shutdown()
    assert url in str(e.value) and "chat-completions API" in str(e.value) and "fix the teacher" not in str(e.value)
