"""Record what `make demo` prints: its verdict and table, in bench/out/demo.txt and in the README.

    .venv/bin/python bench/demo_record.py                 # run `make demo` now, then record it (`make demo-record`)
    .venv/bin/python bench/demo_record.py --from-log LOG  # record from a saved `make demo` output

The CPU engine is deterministic and `make setup` installs the locked versions, so a fresh clone
of the same lock prints the same digits: this file and the README's demo block are that
output, and tests/test_demo_record.py fails while the two differ. Re-record both in one step
after `make lock` or any change that moves the figures. bench/out/demo.txt also says how and
when the figures were made (commit, versions, host, wall time); the README holds no date.
"""

from __future__ import annotations

import argparse
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "bench" / "out" / "demo.txt"
README = REPO / "README.md"
TUTORIAL = REPO / "docs" / "tutorial.md"
# The pages that show the demo's output: each holds one block between the markers, rewritten with the record.
PAGES = (README, TUTORIAL)
START, END = "<!-- demo-table:start -->", "<!-- demo-table:end -->"

# The summary is what `selfimprove run` prints after the "finalize end" phase line: the verdict, then
# the table (its title says the split, n and the seeds per arm), then the tests and notes. The record
# keeps the verdict and the table, whose last line is the table's bottom border.
_FINALIZE_END = re.compile(r"^\d\d:\d\d:\d\d finalize end\b")
_TABLE_END = ("└", "+-")  # rich's box, or the ASCII box of a console without unicode


def summary_block(output: str) -> str:
    """The verdict and table that a `make demo` output ends with (ValueError when it has none)."""
    lines = output.splitlines()
    starts = [i for i, ln in enumerate(lines) if _FINALIZE_END.match(ln)]
    if not starts:
        raise ValueError("no 'finalize end' line: the demo did not reach Phase 5")
    block = []
    for ln in lines[starts[-1] + 1:]:
        block.append(ln.rstrip())
        if ln.startswith(_TABLE_END) and len(block) > 1:
            break
    else:
        raise ValueError("no summary table after 'finalize end'")
    while block and not block[0]:
        block.pop(0)
    if len(block) < 3 or not any("eval_acc" in ln for ln in block):
        raise ValueError("no summary table after 'finalize end'")
    return "\n".join(block)


def recorded_block(record_text: str) -> str:
    """The summary inside bench/out/demo.txt (between its markers)."""
    return _between(record_text, "bench/out/demo.txt")


def readme_block(readme_text: str, name: str = "README.md") -> str:
    """The summary inside a page's demo block (its ``` fence stripped): README.md or docs/tutorial.md."""
    inner = _between(readme_text, name).strip("\n")
    fence = inner.splitlines()
    if len(fence) < 2 or not fence[0].startswith("```") or fence[-1] != "```":
        raise ValueError(f"{name}: the block between {START} and {END} is not one ``` fence")
    return "\n".join(fence[1:-1])


def _between(text: str, name: str) -> str:
    if text.count(START) != 1 or text.count(END) != 1:
        raise ValueError(f"{name}: expected one {START} and one {END}")
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n")


def _versions() -> str:
    from importlib.metadata import version

    return ", ".join(f"{n} {version(n)}" for n in ("torch", "transformers", "verifiers", "datasets"))


def write_record(block: str, *, how: str) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    header = (f"# What `make demo` printed: its verdict and table (bench/demo_record.py)\n"
              f"# recorded {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at commit {commit}; {how}\n"
              f"# {_versions()}; {platform.machine()}, {platform.python_version()}\n")
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    RECORD.write_text(f"{header}{START}\n{block}\n{END}\n")
    texts = {page: page.read_text() for page in PAGES}
    for page, text in texts.items():
        _between(text, page.name)  # the markers must be there before anything is rewritten
    for page, text in texts.items():
        before, rest = text.split(START, 1)
        after = rest.split(END, 1)[1]
        page.write_text(f"{before}{START}\n```\n{block}\n```\n{END}{after}")


def run_demo() -> tuple[str, float]:
    """`make demo`, its output echoed as it comes and returned."""
    started = time.time()
    proc = subprocess.Popen(["make", "--no-print-directory", "demo"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    out = []
    for line in proc.stdout:
        sys.stdout.write(line)
        out.append(line)
    if proc.wait() != 0:
        sys.exit(f"make demo exited {proc.returncode}: nothing recorded")
    return "".join(out), time.time() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from-log", type=Path, help="a saved `make demo` output instead of running it now")
    args = ap.parse_args()
    if args.from_log:
        output, how = args.from_log.read_text(), f"from the saved output {args.from_log}"
    else:
        output, wall = run_demo()
        how = f"make demo ran here in {wall / 60:.1f} min"
    try:
        block = summary_block(output)
    except ValueError as e:
        sys.exit(f"{args.from_log or 'make demo'}: {e}; nothing recorded")
    write_record(block, how=how)
    print(f"recorded the demo's summary ({len(block.splitlines())} lines) in {RECORD}, {README} and {TUTORIAL}")


if __name__ == "__main__":
    main()
