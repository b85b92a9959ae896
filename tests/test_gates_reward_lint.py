"""The reward-function lint (Non-negotiable 4): each condition fails alone; teacher code runs out of process."""

from __future__ import annotations

import sys
import textwrap

import pytest
from gate_fixtures import make_rows, sub_label, valid_report

from selfimprove.gates import CustomReward, lint_reward_functions

ROWS = make_rows()[:20]
MODES = valid_report().failure_modes()

VALID = textwrap.dedent('''
    """Custom rewards for iter_1."""
    import re

    TAG = re.compile(r"<answer>(.*?)</answer>", re.S)


    # Failure mode: failure mode 0a dropped (the final tag goes missing).
    async def has_answer_tag(completion, answer, info=None, state=None, **kwargs) -> float:
        """1.0 when the completion ends with a well-formed answer tag holding the answer."""
        text = completion if isinstance(completion, str) else str(completion)
        found = TAG.findall(text)
        return 1.0 if found and found[-1].strip() == answer.strip() else 0.0
    ''')


def declared(name="has_answer_tag", weight=0.1):
    return CustomReward(name=name, weight=weight, failure_mode=sub_label(0, 0), source_file="rewards.py")


def lint(tmp_path, source=VALID, rewards=None, **kw):
    path = tmp_path / "rewards.py"
    path.write_text(source)
    return lint_reward_functions(path, rewards if rewards is not None else [declared()], ROWS, MODES, **kw)


def test_valid_reward_passes(tmp_path):
    """A compliant reward passes, is called twice on every row, and returns 1.0 on the baseline rows."""
    g = lint(tmp_path)
    assert g.passed, g.summary()
    assert g.stats["functions"]["has_answer_tag"] == {"calls": 40, "min": 1.0, "max": 1.0}


def test_no_declared_rewards_pass_without_a_file(tmp_path):
    g = lint_reward_functions(tmp_path / "absent.py", [], ROWS, MODES)
    assert g.passed


def body(code: str, signature: str = "async def has_answer_tag(completion, answer, info=None, state=None, **kwargs) -> float:",
         comment: str = "# Failure mode: failure mode 0a dropped.", header: str = "") -> str:
    return header + "\n" + comment + "\n" + signature + "\n" + textwrap.indent(textwrap.dedent(code).strip("\n"), "    ") + "\n"


OK = "return 1.0"

CASES = [
    ("reward_source", "def broken(:\n", None),
    ("reward_missing", VALID, [declared("not_there")]),
    ("reward_signature", body(OK, "def has_answer_tag(completion, answer, info=None, state=None, **kwargs) -> float:"), None),
    ("reward_signature", body(OK, "async def has_answer_tag(completion, answer, info=None, state=None) -> float:"), None),
    ("reward_signature", body(OK, "async def has_answer_tag(completion, answer, info=None, state=None, **kwargs):"), None),
    ("reward_signature", body(OK, "async def has_answer_tag(completion, answer, info=None, state={}, **kwargs) -> float:"), None),
    ("reward_signature", body(OK, "async def has_answer_tag(completion, answer, info=None, state=None, *, k=1, **kwargs) -> float:"), None),
    ("reward_body_length", body("\n".join(f"x{i} = {i}" for i in range(10)) + "\nreturn 1.0"), None),
    ("reward_ground_truth", body("return 1.0 if state is None else 0.0"), None),
    ("reward_ground_truth", body("return 1.0 if kwargs.get('info') is None else 0.0"), None),
    ("reward_ground_truth", body("if answer == 'x':\n    open('dataset.jsonl')\nreturn 1.0"), None),
    ("reward_failure_mode_comment", body(OK, comment="# a helpful reward"), None),
    ("reward_weight", VALID, [declared(weight=0.25)]),
    ("reward_total_weight", VALID + body(OK).replace("has_answer_tag", "second"), [declared(weight=0.2), declared("second", 0.15)]),
    ("reward_range", body("return 1.5 if answer else 0.0"), None),
    ("reward_range", body("return 'yes'"), None),
    ("reward_deterministic", body("return random.random()", header="import random\n"), None),
    ("reward_call_error", body("raise ValueError('nope')"), None),
    ("reward_import", body(OK, header="raise RuntimeError('import-time failure')\n"), None),
]


@pytest.mark.parametrize("rule,source,rewards", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_rule_fails_alone(tmp_path, rule, source, rewards):
    """Breaking one condition makes exactly that rule fail."""
    g = lint(tmp_path, source, rewards)
    assert g.failed_rules == {rule}, g.summary()


def test_timeout_kills_a_hanging_reward(tmp_path):
    """A reward that never returns fails `reward_timeout` and does not hang the gate."""
    g = lint(tmp_path, body("while True:\n    pass\nreturn 1.0"), timeout_s=1.5)
    assert g.failed_rules == {"reward_timeout"}, g.summary()


def test_runtime_failures_name_rows(tmp_path):
    """Range failures list the generated rows that produced them."""
    g = lint(tmp_path, body("return 2.0 if int(answer) % 2 else 1.0"))
    bad = [i for i, r in enumerate(ROWS) if int(r["answer"]) % 2]
    assert bad and g.failures[0].rows == bad


def test_comment_inside_body_or_docstring_counts(tmp_path):
    """The failure-mode citation may sit in the body or the docstring, matched case-insensitively."""
    src = body("# guards FAILURE MODE 0A DROPPED\nreturn 1.0", comment="")
    assert lint(tmp_path, src).passed
    src = body('"""Targets failure mode 0a dropped."""\nreturn 1.0', comment="")
    assert lint(tmp_path, src).passed


def test_comment_must_be_directly_above(tmp_path):
    """A citation separated from the def by code does not count."""
    src = "# Failure mode: failure mode 0a dropped.\nX = 1\n" + body(OK, comment="")
    assert lint(tmp_path, src).failed_rules == {"reward_failure_mode_comment"}


def test_docstring_and_comments_do_not_count_as_body_lines(tmp_path):
    code = '"""Doc\n\nstring."""\n' + "\n".join(f"# note {i}\nx{i} = {i}\n" for i in range(9)) + "return 1.0"
    assert lint(tmp_path, body(code)).passed


def test_teacher_code_is_never_imported_in_process(tmp_path):
    """The lint runs teacher code in a subprocess; a print at import time does not disturb it."""
    g = lint(tmp_path, body(OK, header="print('hello from teacher code')\n"))
    assert g.passed, g.summary()
    assert "_selfimprove_lint_rewards" not in sys.modules
    assert not any(getattr(m, "__file__", None) == str(tmp_path / "rewards.py") for m in list(sys.modules.values()))


def test_several_failures_are_all_reported(tmp_path):
    src = body("return state or 3.0", signature="def has_answer_tag(completion, answer, info=None, state=None, **kwargs):", comment="")
    g = lint(tmp_path, src, [declared(weight=0.5)])
    assert g.failed_rules == {"reward_signature", "reward_ground_truth", "reward_failure_mode_comment", "reward_weight",
                              "reward_total_weight", "reward_range"}
