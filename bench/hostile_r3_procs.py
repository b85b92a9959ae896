"""Round 3, area procs (issue 24): what a teacher's generator writes and leaves running.

Each case starts at iter_1's teacher stop with the scripted teacher's files (tests/loop_helpers.py) and a
generator that writes the scripted rows and then does one hostile thing. Rows the gate must read as valid
pass (`iterate --once` ends 0); rows it must refuse end at the dataset gate (exit 4) naming dataset.jsonl
and the rule; a generator that crashes or breaks its iteration dir is a teacher stop (exit 3) naming the file.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from hostile import case, copy_run

WRITE_ROWS = 'with open("dataset.jsonl", "w") as f:'


def _generator(tail: str, dumps: str = "json.dumps(r)") -> str:
    """The scripted teacher's generator (valid rows), `tail` run between building and writing its rows."""
    from loop_helpers import GENERATOR

    gen = GENERATOR.format(break_rules=[])
    head = gen[: gen.index(WRITE_ROWS)]
    return (head + "import os, subprocess\n" + tail + "\n"
            + f'with open("dataset.jsonl", "w", encoding="utf-8") as f:\n    for r in rows:\n        f.write({dumps} + "\\n")\n')


def gen_case(name: str, tail: str, names, code: int | None = None, bad: bool = True, after: str = "",
             dumps: str = "json.dumps(r)", once: bool = False, setup_extra=None, timeout: str | None = None):
    """A case whose generator runs `tail` before writing the rows and `after` once they are written."""
    def setup(tmp: Path, t):
        run = copy_run(t.stop1, tmp)
        from loop_helpers import write_teacher_files

        write_teacher_files(run / "iter_1")
        (run / "iter_1" / "gen_dataset.py").write_text(_generator(tail, dumps) + after, encoding="utf-8")
        if setup_extra:
            setup_extra(run / "iter_1")
        return (["iterate", "--run-dir", str(run), *(["--once"] if once else []),
                 *(["--gen-timeout", timeout] if timeout else [])], run)
    case(f"r3 procs: {name}", names, code=code, bad=bad, may_change=True)(setup)


# 2a. Line separators inside JSON strings are not line ends: JSONL lines end at "\n" only.
gen_case("rows holding U+2028 and U+0085 (ensure_ascii=False) are valid",
         'rows[0]["question"] += " \\u2028 then \\u0085 then \\u2029 ok"', (), bad=False, once=True,
         dumps="json.dumps(r, ensure_ascii=False)")
# 2b. Strings that are JSON but not text: the gate names the line.
gen_case("a lone surrogate in a question", 'rows[5]["question"] += "\\ud800"', ("dataset.jsonl", "line"), 4)
gen_case("one deeply nested line", "", ("dataset.jsonl", "line"), 4,
         after="open('dataset.jsonl', 'a').write('{\"a\": ' + '[' * 200000 + ']' * 200000 + '}\\n')\n")
# 2c. What the engine would refuse after packaging is refused by the gate, as a rule the teacher acts on.
gen_case("a NUL in a question", 'rows[7]["question"] = "What is\\x00 7 + 5?"', ("dataset.jsonl", "control"), 4)
gen_case("a 1 MB question", 'rows[9]["question"] += " x" * 500_000', ("dataset.jsonl", "characters"), 4)
# 2d. A crash quoting a 5 MB line: the stop message quotes a capped tail.
gen_case("crash after printing a 5 MB line", 'print("y" * 5_000_000)\nraise SystemExit("boom")', "gen_dataset.py", 3)
# 2e. The generator deletes the report it is gated against.
gen_case("generator deletes weakness_report.md", "", "weakness_report.md", 3,
         after="os.remove('weakness_report.md')\n")
# 2f. dataset.jsonl as a directory: named once; a fixed generator recovers.
gen_case("generator makes dataset.jsonl a directory", 'os.mkdir("dataset.jsonl")\nraise SystemExit(0)',
         "dataset.jsonl", 3)


def _dataset_dir(it: Path) -> None:
    (it / "dataset.jsonl").mkdir()
    (it / "dataset.jsonl" / "part-0.jsonl").write_text("{}\n")


gen_case("a fixed generator after dataset.jsonl became a directory", "", (), bad=False, once=True,
         setup_extra=_dataset_dir)


# 2g. Labels that differ only in Unicode normalisation print identically: the message must show the difference.
def _nfc_report(it: Path) -> None:
    from gate_fixtures import report_dict, write_report

    fm = report_dict()
    old = fm["domains"][0]["label"]
    new = unicodedata.normalize("NFC", "caf\u00e9 " + old)
    fm["domains"][0]["label"] = new
    for b in fm["buckets"]:
        if b["domain"] == old:
            b["domain"] = new
    write_report(it / "weakness_report.md", fm)


gen_case("row labels in NFD, report labels in NFC",
         "import unicodedata\nD0 = rows[0]['info']['domain']\nfor r in rows:\n"
         "    if r['info']['domain'] == D0:\n"
         "        r['info']['domain'] = unicodedata.normalize('NFD', 'caf\\u00e9 ' + r['info']['domain'])",
         ("NFC",), 4, setup_extra=_nfc_report)

# 1. A child that escapes the generator's process group (its own session) and appends by path after the
# generator exits, and one that outlives a timeout: both are killed, the gate never sees their lines.
# (It waits 2 s first: what a child writes while the generator still runs is the generator's output.)
ESCAPE = ("subprocess.Popen([sys.executable, '-c', 'import time\\ntime.sleep(2)\\nfor _ in range(100):\\n    time.sleep(0.1)\\n"
          "    open(\"dataset.jsonl\", \"a\").write(\"not json\\\\n\")'], start_new_session=True)\n")
gen_case("a start_new_session child appends to dataset.jsonl after the generator exits", "", (), bad=False,
         once=True, after=ESCAPE)
gen_case("a start_new_session child outlives a generator timeout", "", "gen_dataset.py", 3,
         after=ESCAPE + "import time\ntime.sleep(60)\n", timeout="3")
