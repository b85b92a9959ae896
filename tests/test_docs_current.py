"""Doc statements that went stale (issue 43), held to the code or to a real run's record by a test."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def _demo_record():
    spec = importlib.util.spec_from_file_location("demo_record", REPO / "bench" / "demo_record.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tutorials_demo_block_is_the_recorded_demo_output() -> None:
    """docs/tutorial.md shows what `make demo` printed (bench/out/demo.txt), rewritten by `make demo-record`."""
    rec = _demo_record()
    recorded = rec.recorded_block(rec.RECORD.read_text())
    assert rec.TUTORIAL in rec.PAGES
    assert rec.readme_block(rec.TUTORIAL.read_text(), "docs/tutorial.md") == recorded


def _make_demo_command() -> str:
    """The command `make demo` runs, with the Makefile's default knobs filled in."""
    make = (REPO / "Makefile").read_text()
    budget = re.search(r"^BUDGET \?= (\S+)", make, re.M).group(1)
    flags = re.search(r"^DEMO_FLAGS \?= (.*?)(?<!\\)\n", make, re.M | re.S).group(1)
    flags = " ".join(flags.replace("\\\n", " ").replace("$(BUDGET)", budget).split())
    teacher = re.search(r"^demo:.*\n\t.*\$\(DEMO_FLAGS\) (--teacher \S+)", make, re.M).group(1)
    return f"selfimprove run selfimprove-arith {flags} {teacher}"


def test_results_page_names_the_demo_command_the_makefile_runs() -> None:
    text = " ".join((DOCS / "results.md").read_text().split())
    command = _make_demo_command()
    assert "--budget" in command and command in text, f"docs/results.md should name `{command}`"


def test_make_targets_named_in_the_docs_exist() -> None:
    targets = set(re.findall(r"^([\w-]+):", (REPO / "Makefile").read_text(), re.M))
    pages = [*DOCS.rglob("*.md"), REPO / "README.md"]
    named = {(p.name, t) for p in pages for t in re.findall(r"`make ([\w-]+)", p.read_text())}
    missing = sorted((page, t) for page, t in named if t not in targets)
    assert not missing, f"docs name make targets the Makefile lacks: {missing}"


def test_no_list_starts_right_under_a_paragraph_line() -> None:
    """Python-Markdown (mkdocs) needs a blank line before a list, or the items render as one paragraph."""
    bad = []
    for page in [*DOCS.rglob("*.md"), REPO / "SKILL.md", REPO / "SKILL-reference.md"]:
        lines, fenced = page.read_text().split("\n"), False
        for i in range(1, len(lines)):
            if lines[i - 1].startswith("```"):
                fenced = not fenced
            prev, cur = lines[i - 1], lines[i]
            if fenced or not prev.strip() or not re.match(r"(- |\* |\d+\. )", cur):
                continue
            if not re.match(r"\s*(- |\* |\d+\. )", prev) and not prev.startswith(("  ", "|", "#", "<")):
                bad.append(f"{page.relative_to(REPO)}:{i + 1}")
    assert not bad, f"a list right under a paragraph line (add a blank line): {bad}"
