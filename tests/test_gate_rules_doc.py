"""docs/reference/gate-rules.md (issue 43): one worked example per gate rule, captured from real gate runs.

- The committed page is what docs/gen_gate_rules.py generates now: a changed gate message, fixture or
  rule fails here until the page is regenerated (`.venv/bin/python docs/gen_gate_rules.py`).
- Every rule id in the gates' source (src/selfimprove/gates, src/selfimprove/phases) has its example:
  a new rule without one fails here, and so does a `rule=` the generator's scan cannot read.
- Captured messages are untrusted text in fenced blocks: no message can close its fence.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def _gen():
    spec = importlib.util.spec_from_file_location("gen_gate_rules", DOCS / "gen_gate_rules.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen():
    return _gen()


@pytest.fixture(scope="module")
def generated(gen) -> str:
    """The page as the gates print it now (runs every example: about a minute)."""
    return gen.page_markdown()


def _committed(gen) -> str:
    return (DOCS / gen.PAGE).read_text(encoding="utf-8")


def test_committed_page_is_what_the_gates_print_now(gen, generated):
    assert _committed(gen) == generated, (
        f"docs/{gen.PAGE} differs from what the gates print now; regenerate it: {gen.REGENERATE}")


def test_every_rule_in_the_gates_source_has_an_example(gen):
    rules, unresolved = gen.source_rules()
    assert not unresolved, f"`rule=` values the scan cannot read (name the rule id as a string): {unresolved}"
    # the scan sees at least what a plain text search sees
    grep = set()
    for folder in gen.GATE_SOURCES:
        for path in (REPO / folder).glob("*.py"):
            text = path.read_text(encoding="utf-8")
            grep |= set(re.findall(r'\brule="(\w+)"', text)) | set(re.findall(r'\bfail\(\s*"(\w+)"', text))
            grep |= set(re.findall(r'"(seed_\w+)": line\(', text))
    assert grep and grep <= rules, f"rules a text search finds that the scan misses: {sorted(grep - rules)}"
    page = _committed(gen)
    missing = sorted(r for r in rules if f"\n### `{r}`\n" not in page)
    assert not missing, f"docs/{gen.PAGE} has no worked example for {missing}; add one in docs/gen_gate_rules.py"
    examples = [ex.rule for ex in gen.REPORT_EXAMPLES + gen.DATASET_EXAMPLES]
    assert sorted(examples) == sorted(rules), "an example for a rule the gates no longer have, or one rule twice"


def test_a_new_rule_in_the_source_is_seen(gen, tmp_path, monkeypatch):
    """The scan reads a new GateFailure's id, and flags a `rule=` it cannot read."""
    for folder in gen.GATE_SOURCES:
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / gen.GATE_SOURCES[0] / "new_gate.py").write_text(
        "def check(rows, rule_id):\n"
        "    return [GateFailure(rule=\"brand_new_rule\", message=\"x\"), GateFailure(rule=rule_id, message=\"y\")]\n",
        encoding="utf-8")
    monkeypatch.setattr(gen, "REPO", tmp_path)
    rules, unresolved = gen.source_rules()
    assert rules == {"brand_new_rule"}
    assert unresolved == [f"{gen.GATE_SOURCES[0]}/new_gate.py:2"]


def test_the_check_flag_names_a_stale_page(gen, generated, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gen, "DOCS", tmp_path)
    monkeypatch.setattr(gen, "PAGES", {gen.PAGE: lambda: generated})
    assert gen.main([]) == 0 and gen.main(["--check"]) == 0
    (tmp_path / gen.PAGE).write_text(generated.replace("**Fix:**", "**Fixed by hand:**", 1), encoding="utf-8")
    assert gen.main(["--check"]) == 1
    assert f"docs/{gen.PAGE} is out of date" in capsys.readouterr().err


def test_no_message_can_close_its_fence(gen, generated):
    """A fence is longer than any backtick run inside it, and the page's fences all pair up."""
    text = "a message with ``` inside, and ```` too"
    block = gen.fence(text, "text")
    opening = block.split("\n", 1)[0]
    assert opening == "`````text" and block.endswith("\n`````")
    open_fence = None
    for line in generated.splitlines():
        m = re.match(r"^(`{3,})(\w*)$", line)
        if open_fence is None and m:
            open_fence = m.group(1)
        elif open_fence is not None and line == open_fence:
            open_fence = None
        elif open_fence is not None:
            assert not line.startswith(open_fence), f"a line inside a fence could close it: {line[:80]}"
    assert open_fence is None, "a fenced block is never closed"
    assert "/tmp" not in generated and "selfimprove-gate-rules" not in generated, "a temporary path leaked"
