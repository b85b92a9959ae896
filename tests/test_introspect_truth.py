"""introspect tells the truth (issue 24, round 3): no parser-mismatch warning when the reward
functions call the env's parser themselves (verifiers' reverse_text); the scratchpad header
follows `introspect --env-args` / `--hub-id`; a run whose hub id is wrong is mended with
`introspect --hub-id`, not left a dead end."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from selfimprove.models import RunConfig
from selfimprove.rundir import read_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src" / "selfimprove" / "stack"))
import _env_probe as probe  # noqa: E402  (run by path in production: not a package module)

ENV_SOURCE = textwrap.dedent(
    '''
    import verifiers as vf
    from datasets import Dataset

    MODULE_PARSER = vf.XMLParser(["think", "answer"], answer_field="answer")


    def _answer(completion):
        return MODULE_PARSER.parse_answer(completion) or ""


    def helper_reward(completion, answer, **kwargs) -> float:  # the parser via a helper and a global
        return float(_answer(completion) == answer)


    def given_parser_reward(completion, answer, parser, **kwargs) -> float:  # the rubric's parser
        return float((parser.parse_answer(completion) or "") == answer)


    def load_environment(given: bool = False, **kwargs):
        parser = vf.XMLParser(["think", "answer"], answer_field="answer")

        def lcs_reward_func(completion, answer, **kwargs) -> float:  # reverse_text: the closure's parser
            return float((parser.parse_answer(completion) or "") == answer)

        funcs = [lcs_reward_func, helper_reward] + ([given_parser_reward] if given else [])
        rubric = vf.Rubric(funcs=funcs)  # its parser: the default vf.Parser
        rows = [{"question": f"abc {i}", "answer": f"{i} cba"} for i in range(5)]
        return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), system_prompt="Reverse the text.",
                                parser=parser, rubric=rubric)
    '''
)


@pytest.fixture(scope="module")
def env_module(tmp_path_factory):
    root = tmp_path_factory.mktemp("revenv")
    (root / "si_truth_rev_env.py").write_text(ENV_SOURCE)
    sys.path.insert(0, str(root))
    yield "si_truth_rev_env"
    sys.path.remove(str(root))


def _mismatch(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "differs from the env's parser" in w]


def test_no_parser_warning_when_the_rewards_call_the_envs_parser(env_module):
    info = probe.introspect(env_module, {}, 2)
    assert info["parser_class"] == "XMLParser" and info["rubric_class"] == "Rubric"
    assert _mismatch(info["warnings"]) == [], info["warnings"]


def test_the_warning_stays_and_names_a_function_given_the_rubrics_parser(env_module):
    info = probe.introspect(env_module, {"given": True}, 2)
    (w,) = _mismatch(info["warnings"])
    assert "given_parser_reward score with the rubric's" in w and "lcs_reward_func" not in w


# ---------------------------------------------------------------- the header and --hub-id


def _header_env_line(run_dir: Path) -> str:
    return next(ln for ln in (run_dir / "scratchpad.md").read_text().splitlines() if ln.startswith("- real environment:"))


def test_header_follows_env_args(cli, new_run):
    run_dir = new_run()
    assert '(env args: `{}`)' in _header_env_line(run_dir)
    res = cli("introspect", "--run-dir", run_dir, "--env-args", '{"num_train": 50}')
    assert res.exit_code == 0, res.stderr
    assert _header_env_line(run_dir) == '- real environment: `primeintellect/selfimprove-arith` (env args: `{"num_train": 50}`)'
    assert (run_dir / "scratchpad.md").read_text().count("- real environment:") == 1


def test_hub_id_mends_a_run_aborted_for_a_wrong_id(cli, runs_dir, tmp_path, monkeypatch):
    """bootstrap with a name the hub does not know -> introspect aborts the run; `introspect --hub-id`
    with the right id re-opens it, records the id in run.json and the header, and introspects."""
    from test_introspect import bootstrap, fake_prime_env

    fake_prime_env(monkeypatch, tmp_path, mode="notfound")
    run_dir = bootstrap(cli, runs_dir, "selfimprove-arith-typo", "--hub-id", "fakeowner/si-missing-env")
    assert cli("introspect", "--run-dir", run_dir).exit_code == 1
    assert read_model(run_dir / "run.json", RunConfig).status == "aborted"

    bad = cli("introspect", "--run-dir", run_dir, "--hub-id", "a b/c")
    assert bad.exit_code == 2 and "--hub-id 'a b/c'" in bad.stderr
    res = cli("introspect", "--run-dir", run_dir, "--hub-id", "selfimprove-arith")  # importable: no hub needed
    assert res.exit_code == 0, res.stderr
    cfg = read_model(run_dir / "run.json", RunConfig)
    assert cfg.status == "running" and cfg.hub_id == "selfimprove-arith" and cfg.reason is None and cfg.end_ts is None
    assert _header_env_line(run_dir).startswith("- real environment: `selfimprove-arith` ")
    assert json.loads((run_dir / "hub_env.json").read_text())["env_id"] == "selfimprove-arith"


def test_hub_id_is_refused_once_baseline_started(cli, new_run):
    run_dir = new_run()
    (run_dir / "iter_0").mkdir()
    (run_dir / "iter_0" / "canonical_rl.toml").write_text("")
    before = (run_dir / "run.json").read_bytes()
    res = cli("introspect", "--run-dir", run_dir, "--hub-id", "owner/other")
    assert res.exit_code == 2 and "--hub-id" in res.stderr and "baseline has started" in res.stderr
    assert (run_dir / "run.json").read_bytes() == before
