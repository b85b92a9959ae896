"""Decontamination without an oracle: the tool drops generated rows that overlap the evaluated questions.

    dropped = drop_eval_overlap(it_dir / "dataset.jsonl", eval_index(ctx))  # in the generate step

Why the tool drops them instead of failing the gate: a gate that names the
flagged rows is a membership oracle for the sealed eval split. A teacher that
redraws the flagged rows and re-runs learns, row by row, which of its
candidates are evaluated questions (an LLM teacher went from 24 flagged rows
to 4 to 1). So the generate step removes every row `find_eval_overlap`
flags (dedup.py: the one definition of overlap, both `eval_overlap` and
`eval_contained`) right after the generator exits, and what the teacher can
read (generate.json, gate_report.*, messages, the scratchpad) holds only the
COUNT dropped. The dataset gate then bounds the kept rows (500-1000), and its
eval-overlap check stays as a defensive second check, reporting counts only.

What a count still leaks, and why only a rule closes it:
- Diffing dataset.jsonl against the output of one's own generator shows which
  rows went. The tool cannot hide that without hiding the training data the
  other gates' row numbers point into.
- Count differentials: generators that differ in one candidate row, run one
  after the other, tell from the dropped count whether that row is evaluated,
  one question per generator run (the same holds for the gate's
  rows_with_any_shared_ngram statistic).
Both need the teacher to probe on purpose, so a rule in SKILL.md closes them:
never diff dataset.jsonl against your own run of the generator, never vary a
generator to watch the count; a non-zero count means "draw from a source
farther from the evaluated questions", not "find out which rows went".
"""

from __future__ import annotations

from pathlib import Path

from ..rundir import atomic_write_text
from .dataset import parse_jsonl_line
from .dedup import find_eval_overlap
from .ngram_hash import EvalNgramIndex


def drop_eval_overlap(dataset: Path, index: EvalNgramIndex) -> int:
    """Drop every row of `dataset` (JSONL) that overlaps the indexed questions; return how many went.

    The rest is rewritten atomically, each kept line byte for byte and in order,
    blank and unparseable lines included (the dataset gate reports those by line);
    a dataset with nothing to drop is left untouched. A file that is not UTF-8
    is left as it is too: the dataset gate refuses it before comparing any row.
    """
    try:
        text = Path(dataset).read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return 0
    # Rows are numbered as load_dataset_jsonl numbers them (non-blank lines holding a JSON object),
    # so "row i" is the same row here and in every gate.
    # (parse_jsonl_line: lines that are no row, e.g. a lone surrogate, are the load gate's, never hashed here).
    lines = text.split("\n")  # split_jsonl, each line given back its "\n" (the last has none)
    lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    rows: list[dict] = []
    line_of_row: list[int] = []
    for lineno, line in enumerate(lines):
        row, _problem = parse_jsonl_line(line)
        if row is not None:
            rows.append(row)
            line_of_row.append(lineno)
    dropped_lines = {line_of_row[i] for i in find_eval_overlap(rows, index).rows}
    if dropped_lines:
        atomic_write_text(dataset, "".join(line for lineno, line in enumerate(lines) if lineno not in dropped_lines))
    return len(dropped_lines)
