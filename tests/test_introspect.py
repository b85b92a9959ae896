"""Phase 1 (`selfimprove introspect`) end to end, without network.

- the embedded env `selfimprove-arith` (already importable: prime is skipped);
- a second classic env written here (XMLParser think/answer, a custom Rubric with an
  LCS-ratio reward and a format reward of different weights, an eval split holding
  a canary), installed with `--env-path` (pip, offline): nothing is arithmetic-specific
  and no eval row leaks;
- hub ids through a fake `prime` (tests/fakes/prime) on PATH: found + installed,
  offline (exit 75, run untouched), not found (run aborted), broken installs;
- the seed's Qwen3 + ThinkParser warning.

Each introspection costs a fresh interpreter (~3-7 s), so the three successful runs
are module-scoped fixtures shared by the tests that check them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from selfimprove.cli import app
from selfimprove.errors import EnvNotFound, HubUnreachable
from selfimprove.models import HubEnv, RunConfig
from selfimprove.phases.introspect import (
    SCRATCHPAD_HEADING,
    SCRATCHPAD_KEY,
    _upsert_scratchpad,
    is_qwen3,
    qwen3_warnings,
)
from selfimprove.rundir import RunDir, read_model
from selfimprove.scratchpad import marker
from selfimprove.stack import hub
from selfimprove.stack import verifiers_classic as vc

FAKES = Path(__file__).resolve().parent / "fakes"
CANARY = "CANARY-EVAL-ROW-91x7"  # appears only in the LCS env's eval split

# ---------------------------------------------------------------- envs written by the tests

LCS_ENV_SOURCE = textwrap.dedent(
    f'''
    """A text-reversal env: nothing arithmetic about it."""
    from difflib import SequenceMatcher

    import verifiers as vf
    from datasets import Dataset

    SYSTEM_PROMPT = (
        "You reverse text character by character. Think step by step inside <think>...</think> tags, "
        "then give only the reversed text inside <answer>...</answer> tags. Be careful with punctuation."
    )
    WORDS = ["alpha beta", "gamma, delta", "hello world!", "red fox", "blue sky", "quiet river"]


    class LcsRubric(vf.Rubric):
        """Scores by similarity, not exact match."""


    def lcs_ratio(completion, answer, parser, **kwargs) -> float:
        parsed = parser.parse_answer(completion) or ""
        return SequenceMatcher(None, parsed, answer).ratio()


    def has_answer_tag(completion, parser, **kwargs) -> float:
        return 1.0 if parser.parse_answer(completion) is not None else 0.0


    def _rows(n, split):
        rows = []
        for i in range(n):
            text = f"{{WORDS[i % len(WORDS)]}} {{i}}"
            if split == "eval":
                text = f"{CANARY} {{text}}"
            rows.append({{"question": text, "answer": text[::-1],
                          "info": {{"split_note": "{CANARY}" if split == "eval" else "train", "length": len(text)}}}})
        return rows


    def load_environment(num_train: int = 40, num_eval: int = 12, **kwargs):
        parser = vf.XMLParser(["think", "answer"], answer_field="answer")
        rubric = LcsRubric(funcs=[lcs_ratio, has_answer_tag], weights=[0.8, 0.2], parser=parser)
        return vf.SingleTurnEnv(
            dataset=lambda: Dataset.from_list(_rows(num_train, "train")),
            eval_dataset=lambda: Dataset.from_list(_rows(num_eval, "eval")),
            system_prompt=SYSTEM_PROMPT, parser=parser, rubric=rubric, **kwargs,
        )
    '''
)

# Installed by the fake prime: a ThinkParser with a boxed extractor, no eval split.
THINK_ENV_SOURCE = textwrap.dedent(
    '''
    import verifiers as vf
    from datasets import Dataset

    def boxed_match(completion, answer, parser, **kwargs) -> float:
        return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0

    def load_environment(**kwargs):
        parser = vf.ThinkParser(extract_fn=vf.extract_boxed_answer)
        rubric = vf.Rubric(funcs=[boxed_match], parser=parser)
        rows = [{"question": f"Name the color number {i}.", "answer": f"color{i}"} for i in range(8)]
        return vf.SingleTurnEnv(
            dataset=Dataset.from_list(rows),
            system_prompt="Think first. Put the final answer in \\\\boxed{}.",
            parser=parser, rubric=rubric,
        )
    '''
)

BROKEN_ENV_SOURCE = textwrap.dedent(
    '''
    def load_environment(**kwargs):
        raise FileNotFoundError("dataset file data/train.jsonl is missing\\nsecond line of detail")
    '''
)


def write_lcs_project(root: Path) -> Path:
    """A tiny installable env project (setuptools: installs offline without build isolation)."""
    proj = root / "si_test_lcs_env"
    proj.mkdir(parents=True)
    (proj / "si_test_lcs_env.py").write_text(LCS_ENV_SOURCE)
    (proj / "pyproject.toml").write_text(textwrap.dedent(
        """
        [project]
        name = "si-test-lcs-env"
        version = "0.1.0"
        dependencies = ["verifiers"]

        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [tool.setuptools]
        py-modules = ["si_test_lcs_env"]
        """
    ))
    return proj


# ---------------------------------------------------------------- helpers


class Cli:
    """conftest's runner, usable from module-scoped fixtures too."""

    def __call__(self, *args):
        return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def fake_prime_env(mp: pytest.MonkeyPatch, root: Path, mode: str = "ok", source: str | None = None) -> Path:
    """Put tests/fakes/prime first on PATH; its installs land in root/site (on PYTHONPATH)."""
    site = root / "site"
    site.mkdir(parents=True, exist_ok=True)
    log = root / "prime_calls.jsonl"
    mp.delenv("SELFIMPROVE_PRIME", raising=False)
    mp.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ.get('PATH', '')}")
    pp = os.environ.get("PYTHONPATH")
    mp.setenv("PYTHONPATH", str(site) + (os.pathsep + pp if pp else ""))
    mp.setenv("FAKE_PRIME_MODE", mode)
    mp.setenv("FAKE_PRIME_SITE", str(site))
    mp.setenv("FAKE_PRIME_LOG", str(log))
    if source is not None:
        src = root / "fake_env_source.py"
        src.write_text(source)
        mp.setenv("FAKE_PRIME_SOURCE", str(src))
    else:
        mp.delenv("FAKE_PRIME_SOURCE", raising=False)
    return log


def prime_calls(log: Path) -> list[list[str]]:
    return [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []


def bootstrap(cli: Cli, runs: Path, dataset: str, *extra: str) -> Path:
    res = cli("bootstrap", dataset, "--runs-dir", runs, "--budget", "15m", "--json", *extra)
    assert res.exit_code == 0, res.stderr
    return Path(json.loads(res.stdout)["run_dir"])


def introspect_json(cli: Cli, run_dir: Path, *extra: str):
    res = cli("introspect", "--run-dir", run_dir, "--json", *extra)
    return res, (json.loads(res.stdout) if res.exit_code == 0 else None)


# ---------------------------------------------------------------- shared successful runs


@pytest.fixture(scope="module")
def arith_run(tmp_path_factory):
    """selfimprove-arith, default args, a Qwen3 student; a fake prime on PATH that must stay unused."""
    root = tmp_path_factory.mktemp("arith")
    with pytest.MonkeyPatch.context() as mp:
        log = fake_prime_env(mp, root)
        cli = Cli()
        run_dir = bootstrap(cli, root / "runs", "selfimprove-arith", "--model", "Qwen/Qwen3-0.6B")
        res, payload = introspect_json(cli, run_dir)
    assert res.exit_code == 0, res.stderr
    return {"run_dir": run_dir, "res": res, "json": payload, "prime_calls": prime_calls(log)}


@pytest.fixture(scope="module")
def lcs_run(tmp_path_factory):
    """The LCS env installed with --env-path (pip, offline), introspected with env args."""
    root = tmp_path_factory.mktemp("lcs")
    proj = write_lcs_project(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PIP_NO_INDEX", "1")  # prove the install needs no network
        log = fake_prime_env(mp, root)
        cli = Cli()
        run_dir = bootstrap(
            cli, root / "runs", "si-test-lcs", "--hub-id", "si-test-lcs-env", "--model", "Qwen/Qwen3-1.7B",
            "--env-args", '{"num_train": 30}',
        )
        res, payload = introspect_json(cli, run_dir, "--env-path", proj)
    try:
        assert res.exit_code == 0, res.stderr
        yield {"run_dir": run_dir, "project": proj, "res": res, "json": payload, "prime_calls": prime_calls(log)}
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-q", "-y", "si-test-lcs-env"], capture_output=True)


@pytest.fixture(scope="module")
def hub_run(tmp_path_factory):
    """A hub id found and installed by the fake prime; a ThinkParser env; a Qwen3 student."""
    root = tmp_path_factory.mktemp("hub")
    with pytest.MonkeyPatch.context() as mp:
        log = fake_prime_env(mp, root, mode="ok", source=THINK_ENV_SOURCE)
        cli = Cli()
        run_dir = bootstrap(cli, root / "runs", "think", "--hub-id", "fakeowner/si-fake-think-env",
                            "--model", "Qwen/Qwen3-0.6B")
        res, payload = introspect_json(cli, run_dir)
    assert res.exit_code == 0, res.stderr
    return {"run_dir": run_dir, "res": res, "json": payload, "prime_calls": prime_calls(log)}


# ---------------------------------------------------------------- selfimprove-arith


def test_arith_hub_env_json_is_valid_and_complete(arith_run):
    """hub_env.json validates and records the arith env's stack, sizes and train rows."""
    h = read_model(arith_run["run_dir"] / "hub_env.json", HubEnv)
    assert h.env_id == "primeintellect/selfimprove-arith" and h.module == "selfimprove_arith"
    assert h.source == "local"
    assert h.env_class == "SingleTurnEnv"
    assert h.parser_class == "XMLParser"
    assert h.parser_config["fields"] == ["answer"] and h.parser_config["answer_field"] == "answer"
    assert h.rubric_class == "Rubric"
    assert [(f.name, f.weight) for f in h.rubric_funcs] == [("correct_answer", 1.0)]
    assert [m.rubric_class for m in h.rubric_group] == ["Rubric", "MultiTurnMonitorRubric"]
    assert h.system_prompt is None  # the arith env has no system turn (see selfimprove_arith.SYSTEM_PROMPT)
    assert h.answer_format_instruction is None
    assert (h.train_size, h.eval_size) == (20000, 1000)
    assert len(h.train_samples) == 3
    for s in h.train_samples:
        assert s.answer.lstrip("-").isdigit() and s.question
    assert h.warnings == []  # XMLParser without a think field: nothing to warn a Qwen3 student about
    assert h.verifiers_version and h.introspected_at


def test_arith_skips_prime_and_json_matches_file(arith_run):
    """An env importable locally never calls prime; --json prints what hub_env.json holds."""
    assert arith_run["prime_calls"] == []
    payload = arith_run["json"]
    on_disk = json.loads((arith_run["run_dir"] / "hub_env.json").read_text())
    assert {k: payload[k] for k in on_disk if k != "introspected_at"} == {
        k: v for k, v in on_disk.items() if k != "introspected_at"
    }
    assert any("prime skipped" in s for s in payload["steps"])


def test_arith_scratchpad_and_status(arith_run, cli):
    """Phase 1 appends its scratchpad section once; status reports the introspect phase."""
    pad = (arith_run["run_dir"] / "scratchpad.md").read_text()
    assert pad.startswith("# Self-improvement run: selfimprove-arith")
    assert pad.count("## Phase 1") == 1 and "correct_answer x1" in pad and "XMLParser" in pad
    res = cli("status", "--run-dir", arith_run["run_dir"], "--json")
    assert res.exit_code == 0
    assert json.loads(res.stdout)["phase_reached"] == "introspect"


def test_arith_rerun_rewrites_without_duplicating(arith_run, cli):
    """Re-running introspect rewrites hub_env.json and keeps one Phase 1 scratchpad section."""
    run_dir = arith_run["run_dir"]
    before = json.loads((run_dir / "hub_env.json").read_text())
    res = cli("introspect", "--run-dir", run_dir)
    assert res.exit_code == 0, res.stderr
    assert "XMLParser" in res.stdout and "correct_answer" in res.stdout
    after = json.loads((run_dir / "hub_env.json").read_text())
    assert after["introspected_at"] > before["introspected_at"]
    assert {k: v for k, v in after.items() if k != "introspected_at"} == {
        k: v for k, v in before.items() if k != "introspected_at"
    }
    assert (run_dir / "scratchpad.md").read_text().count("## Phase 1") == 1
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]


def test_run_parser_over_uses_the_envs_own_parser(arith_run):
    """run_parser_over applies the hub env's parser, batched in one fresh process."""
    h = RunDir(arith_run["run_dir"]).read_hub_env()
    texts = ["<answer>42</answer>", "42", "<answer> -7 </answer>", "<answer>1</answer> then <answer>2</answer>"]
    # On a chat completion (what the rubric sees) verifiers' XMLParser takes the FIRST field,
    # unlike parse_answer(str), which takes the last: the gate must see the rubric's view.
    assert vc.parse_answers(h, texts) == ["42", None, "-7", "1"]
    assert vc.run_parser_over(h.env_id, h.env_args, []) == []


# ---------------------------------------------------------------- a second, non-arithmetic env


def test_second_env_stack_is_discovered(lcs_run):
    """XMLParser(think, answer), a custom Rubric with two weighted non-binary rewards, env args."""
    h = read_model(lcs_run["run_dir"] / "hub_env.json", HubEnv)
    assert h.source == "env-path" and h.module == "si_test_lcs_env"
    assert h.env_args == {"num_train": 30}
    assert h.env_class == "SingleTurnEnv"
    assert h.parser_class == "XMLParser"
    assert h.parser_config["fields"] == ["think", "answer"] and h.parser_config["answer_field"] == "answer"
    assert h.rubric_class == "LcsRubric"
    assert [(f.name, f.weight) for f in h.rubric_funcs] == [("lcs_ratio", 0.8), ("has_answer_tag", 0.2)]
    assert h.rubric_group and h.rubric_group[0].rubric_class == "LcsRubric"
    assert h.system_prompt.startswith("You reverse text character by character.")
    assert h.answer_format_instruction == (
        "Think step by step inside <think>...</think> tags, then give only the reversed text inside "
        "<answer>...</answer> tags."
    )
    assert (h.train_size, h.eval_size) == (30, 12)


def test_second_env_samples_are_train_rows_and_eval_is_sealed(lcs_run):
    """The 3 samples are TRAIN rows (answer = reversed question); the eval canary is nowhere."""
    run_dir = lcs_run["run_dir"]
    h = read_model(run_dir / "hub_env.json", HubEnv)
    assert len(h.train_samples) == 3
    for s in h.train_samples:
        assert s.answer == s.question[::-1]
        assert s.info["split_note"] == "train" and s.info["length"] == len(s.question)
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert CANARY not in path.read_text(errors="replace"), path
    assert CANARY not in lcs_run["res"].stdout and CANARY not in lcs_run["res"].stderr


def test_second_env_records_env_path_and_skips_prime(lcs_run):
    """--env-path is installed with pip (offline), recorded in run.json, and prime is not called."""
    cfg = read_model(lcs_run["run_dir"] / "run.json", RunConfig)
    assert cfg.env_path == str(lcs_run["project"].resolve())
    assert cfg.status == "running"
    assert lcs_run["prime_calls"] == []


def test_second_env_parser_round_trip(lcs_run):
    """The LCS env's XMLParser pulls the <answer> field out of a think/answer completion."""
    out = vc.run_parser_over("si-test-lcs-env", {}, ["<think>\nflip it\n</think>\n<answer>\nab cd\n</answer>", "dc ba"])
    assert out == ["ab cd", None]


def test_qwen3_and_xml_think_field_warns(lcs_run):
    """A Qwen3 student with an XMLParser that has a 'think' field gets a recorded warning."""
    h = read_model(lcs_run["run_dir"] / "hub_env.json", HubEnv)
    assert any("Qwen3" in w and "think" in w for w in h.warnings)


# ---------------------------------------------------------------- hub ids through a fake prime


def test_hub_env_found_and_installed(hub_run):
    """prime env info, then prime env install; the env is then introspected (source hub)."""
    calls = hub_run["prime_calls"]
    assert [c[:3] for c in calls] == [["env", "info", "fakeowner/si-fake-think-env"],
                                      ["env", "install", "fakeowner/si-fake-think-env"]]
    assert "--with" in calls[1]
    h = read_model(hub_run["run_dir"] / "hub_env.json", HubEnv)
    assert h.source == "hub" and h.module == "si_fake_think_env"
    assert h.parser_class == "ThinkParser" and h.parser_config["extract_fn"] == "extract_boxed_answer"
    assert h.rubric_class == "Rubric" and [(f.name, f.weight) for f in h.rubric_funcs] == [("boxed_match", 1.0)]
    assert h.answer_format_instruction == "Put the final answer in \\boxed{}."
    assert (h.train_size, h.eval_size) == (8, None)
    assert any("no eval dataset" in w for w in h.warnings)


def test_qwen3_thinkparser_warning_printed_and_recorded(hub_run):
    """The seed's 3c rule: a Qwen3 student + ThinkParser is warned about, on stderr and in the file."""
    h = read_model(hub_run["run_dir"] / "hub_env.json", HubEnv)
    warns = [w for w in h.warnings if "ThinkParser" in w]
    assert len(warns) == 1 and "Qwen3" in warns[0] and "</think>" in warns[0]
    assert "ThinkParser" in hub_run["res"].stderr and "warning" in hub_run["res"].stderr


def test_hub_offline_is_retryable_and_leaves_run_untouched(cli, runs_dir, tmp_path, monkeypatch):
    """The real CLI's offline message + exit 1 -> exit 75 (retry), run.json byte-identical, no hub_env.json."""
    log = fake_prime_env(monkeypatch, tmp_path, mode="offline")
    run_dir = bootstrap(cli, runs_dir, "offl", "--hub-id", "fakeowner/si-offline-env")
    before = (run_dir / "run.json").read_bytes()
    pad_before = (run_dir / "scratchpad.md").read_bytes()
    res = cli("introspect", "--run-dir", run_dir)
    assert res.exit_code == HubUnreachable.exit_code == 75
    assert "unreachable" in res.stderr and "ConnectError" in res.stderr
    assert (run_dir / "run.json").read_bytes() == before
    assert (run_dir / "scratchpad.md").read_bytes() == pad_before
    assert not (run_dir / "hub_env.json").exists()
    assert [c[:2] for c in prime_calls(log)] == [["env", "info"]]


def test_hub_not_found_aborts_the_run(cli, runs_dir, tmp_path, monkeypatch):
    """A 404 from prime env info -> run.json status=aborted with the seed's reason; exit non-zero."""
    fake_prime_env(monkeypatch, tmp_path, mode="notfound")
    run_dir = bootstrap(cli, runs_dir, "nf", "--hub-id", "fakeowner/si-missing-env")
    res = cli("introspect", "--run-dir", run_dir)
    assert res.exit_code == EnvNotFound.exit_code == 1
    assert "hub env fakeowner/si-missing-env not found" in res.stderr
    cfg = read_model(run_dir / "run.json", RunConfig)
    assert cfg.status == "aborted" and cfg.reason == "hub env fakeowner/si-missing-env not found"
    assert cfg.end_ts is not None
    assert not (run_dir / "hub_env.json").exists()
    assert "ABORTED" in (run_dir / "scratchpad.md").read_text()
    again = cli("introspect", "--run-dir", run_dir)
    assert again.exit_code == 5 and "aborted" in again.stderr
    status = json.loads(cli("status", "--run-dir", run_dir, "--json").stdout)
    assert status["status"] == "aborted" and status["reason"] == cfg.reason


@pytest.mark.parametrize(
    "mode,source,expected",
    [
        ("install-fails", None, "could not install"),  # the real CLI exits 0 here
        ("ok", None, "still not importable"),  # install "succeeded" but provides no module
        ("unauthorized", None, "unauthorized"),
    ],
)
def test_hub_other_failures_do_not_abort(cli, runs_dir, tmp_path, monkeypatch, mode, source, expected):
    """Failures that are neither 'not found' nor 'unreachable': one line, exit 1, run still running."""
    fake_prime_env(monkeypatch, tmp_path, mode=mode, source=source)
    run_dir = bootstrap(cli, runs_dir, "other", "--hub-id", "fakeowner/si-other-env")
    res = cli("introspect", "--run-dir", run_dir)
    assert res.exit_code == 1
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0]
    assert read_model(run_dir / "run.json", RunConfig).status == "running"
    assert not (run_dir / "hub_env.json").exists()


def test_prime_missing_says_how_to_install_it(cli, runs_dir, tmp_path, monkeypatch):
    """No prime on PATH -> a clear error naming `pip install prime`."""
    empty = tmp_path / "empty_bin"
    empty.mkdir()
    run_dir = bootstrap(cli, runs_dir, "noprime", "--hub-id", "fakeowner/si-noprime-env")
    monkeypatch.delenv("SELFIMPROVE_PRIME", raising=False)
    monkeypatch.setenv("PATH", str(empty))
    res = cli("introspect", "--run-dir", run_dir)
    assert res.exit_code == 1
    assert "pip install prime" in res.stderr
    assert read_model(run_dir / "run.json", RunConfig).status == "running"


def test_selfimprove_prime_env_var_overrides_the_executable(tmp_path, monkeypatch):
    """$SELFIMPROVE_PRIME is used as the prime command line (here: python + the fake)."""
    fake_prime_env(monkeypatch, tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # no prime on PATH
    monkeypatch.setenv("SELFIMPROVE_PRIME", f"{sys.executable} {FAKES / 'prime'}")
    assert "fakeowner/thing@latest" in hub.env_info("fakeowner/thing")


# ---------------------------------------------------------------- envs that can't be used


def test_unimportable_env_id_says_how_to_install(cli, runs_dir, tmp_path, monkeypatch):
    """A non-hub env id that no interpreter can import: one line with the three ways to install it."""
    fake_prime_env(monkeypatch, tmp_path)
    run_dir = bootstrap(cli, runs_dir, "nope", "--hub-id", "si-no-such-env")
    before = (run_dir / "run.json").read_bytes()
    res = cli("introspect", "--run-dir", run_dir)
    assert res.exit_code == 1
    msg = res.stderr
    assert "si-no-such-env" in msg and "si_no_such_env" in msg
    assert "pip install -e" in msg and "prime env install" in msg and "--env-path" in msg
    assert (run_dir / "run.json").read_bytes() == before
    assert prime_calls(tmp_path / "prime_calls.jsonl") == []


def test_load_failure_is_one_line_with_the_exceptions_first_line(cli, runs_dir, tmp_path, monkeypatch):
    """An env whose load_environment raises: exit 1, the exception's first line, no hub_env.json."""
    site = tmp_path / "pp"
    site.mkdir()
    (site / "si_broken_env.py").write_text(BROKEN_ENV_SOURCE)
    monkeypatch.setenv("PYTHONPATH", str(site))
    run_dir = bootstrap(cli, runs_dir, "broken", "--hub-id", "si-broken-env")
    res = cli("introspect", "--run-dir", run_dir)
    assert res.exit_code == 1
    assert "FileNotFoundError: dataset file data/train.jsonl is missing" in res.stderr
    assert "second line" not in res.stderr and "Traceback" not in res.stderr
    assert not (run_dir / "hub_env.json").exists()


def test_env_path_without_pyproject_is_refused(cli, new_run, tmp_path):
    """--env-path pointing at a dir that is not a project: one line, nothing installed."""
    run_dir = new_run()
    res = cli("introspect", "--run-dir", run_dir, "--env-path", tmp_path)
    assert res.exit_code == 1 and "pyproject.toml" in res.stderr
    assert not (run_dir / "hub_env.json").exists()


def test_introspect_missing_run_dir(cli, tmp_path):
    """A run dir that does not exist, or has no run.json, is a one-line error."""
    res = cli("introspect", "--run-dir", tmp_path / "nope")
    assert res.exit_code == 1 and "does not exist" in res.stderr
    res = cli("introspect", "--run-dir", tmp_path)
    assert res.exit_code == 1 and "run.json" in res.stderr


# ---------------------------------------------------------------- pure helpers


def test_scratchpad_section_is_replaced_in_place(new_run):
    """Re-writing the Phase 1 section keeps the header and any later entries untouched."""
    rd = RunDir(new_run())
    _upsert_scratchpad(rd, f"{marker(SCRATCHPAD_KEY)}\n{SCRATCHPAD_HEADING}\n\n- first\n")
    rd.append_scratchpad("<!-- selfimprove:iter_0 -->\n## Iteration 0\n\n- kept\n")
    _upsert_scratchpad(rd, f"{marker(SCRATCHPAD_KEY)}\n{SCRATCHPAD_HEADING}\n\n- second\n")
    text = rd.scratchpad.read_text()
    assert text.startswith("# Self-improvement run:")
    assert "- first" not in text and text.count(SCRATCHPAD_HEADING) == 1
    assert text.index("- second") < text.index("## Iteration 0") and "- kept" in text


@pytest.mark.parametrize(
    "prompt,expected",
    [
        ("Compute the expression. Reply with the result only, as <answer>N</answer>.",
         "Reply with the result only, as <answer>N</answer>."),
        ("Solve the problem step by step.\nPut your final answer within \\boxed{}.",
         "Put your final answer within \\boxed{}."),
        ("Reverse the given text.\n\nRespond in the following format:\n<think>\n...\n</think>\n<answer>\n...\n</answer>",
         "Respond in the following format:\n<think>\n...\n</think>\n<answer>\n...\n</answer>"),
        ("You are a helpful assistant. Be concise.", None),
        ("", None),
        (None, None),
        ("Classify the review. Output the label only: positive or negative. Thanks!",
         "Output the label only: positive or negative."),
    ],
)
def test_answer_format_sentence(prompt, expected):
    """The format sentence is the one with the most format cues; None when there is none."""
    assert vc.answer_format_sentence(prompt) == expected


def test_qwen3_rule():
    """Only Qwen3 students with a ThinkParser (or subclass) get the ThinkParser warning."""
    assert is_qwen3("Qwen/Qwen3-0.6B") and is_qwen3("/models/qwen3-4b-instruct") and not is_qwen3("Qwen/Qwen2.5-0.5B")
    assert qwen3_warnings("Qwen/Qwen3-0.6B", "ThinkParser", {"bases": ["Parser"]})
    assert qwen3_warnings("Qwen/Qwen3-0.6B", "MyParser", {"bases": ["ThinkParser", "Parser"]})
    assert qwen3_warnings("Qwen/Qwen2.5-0.5B", "ThinkParser", {"bases": ["Parser"]}) == []
    assert qwen3_warnings("Qwen/Qwen3-0.6B", "MaybeThinkParser", {"bases": ["Parser"]}) == []
    assert qwen3_warnings("Qwen/Qwen3-0.6B", "XMLParser", {"fields": ["answer"]}) == []


def test_env_ids():
    """verifiers' module rule and what counts as a hub slug."""
    assert vc.env_module_name("primeintellect/reverse-text") == "reverse_text"
    assert vc.env_module_name("selfimprove-arith") == "selfimprove_arith"
    assert vc.is_hub_slug("owner/name") and vc.is_hub_slug("owner/name@0.2.3")
    assert not vc.is_hub_slug("name") and not vc.is_hub_slug("a/b/c") and not vc.is_hub_slug("/name")


@pytest.mark.parametrize(
    "rc,output,expected",
    [
        (1, "Fetching o/n@latest...\nFailed to get environment details: Request failed: ConnectError at GET "
            "https://api.primeintellect.ai/api/v1/environmentshub/o/n/@latest: [Errno -3] Temporary failure", HubUnreachable),
        (1, "Failed to get environment details: Request timed out: ReadTimeout", HubUnreachable),
        (1, "Failed to get environment details: HTTP 503: Service Unavailable", HubUnreachable),
        (1, "Failed to get environment details: HTTP 404: Environment not found", EnvNotFound),
        (1, "\x1b[31mFailed to get environment details: HTTP 404: {'detail': 'Not Found'}\x1b[0m", EnvNotFound),
        (1, "Error: Invalid environment ID format: 'x'. Expected: 'owner/name'", hub.HubError),
        (0, "ok", type(None)),
    ],
)
def test_classify_prime_output(rc, output, expected):
    """prime's real messages map to retryable / not found / other."""
    assert isinstance(hub.classify("o/n", "info", rc, output), expected)
