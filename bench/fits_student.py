"""How long the dataset gate's row_fits_student rule takes (issue 36): the engine's tokenizer loaded once,
every row's prompt rendered with the chat template and counted in one batch.

    .venv/bin/python bench/fits_student.py [--rows 1000] [--repeat 5]

Measures prompt_token_counts + check_rows_fit_student for a generated-looking dataset of `--rows` rows
(tests/gate_fixtures.make_rows, repeated to the size) with the tiny-arith student and a system prompt,
the first run (which also imports transformers, as the first gate of an `iterate` process does) and the
median of the others (each loads the tokenizer again, as every gate does). Saves bench/out/fits_student.txt."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from _out import save

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=6)
    a = ap.parse_args()
    from gate_fixtures import make_rows, valid_report

    from selfimprove.gates.dataset import check_rows_fit_student
    from selfimprove.student_limits import prompt_token_counts

    base = make_rows(valid_report())
    rows = [dict(base[i % len(base)], question=f"{base[i % len(base)]['question']} #{i}") for i in range(a.rows)]
    system = "Answer with the number only, inside <answer></answer>."
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        counts, how = prompt_token_counts("selfimprove/tiny-arith", system, [r["question"] for r in rows])
        gate = check_rows_fit_student(rows, counts, counted=how, positions=256, room=24, model="selfimprove/tiny-arith",
                                      room_from="bench")
        times.append(time.perf_counter() - t0)
    text = (f"row_fits_student on {a.rows} rows (selfimprove/tiny-arith, system prompt, batch render): first run "
            f"{times[0]:.2f} s (transformers import + tokenizer load), then median {statistics.median(times[1:]):.2f} s "
            f"over {len(times) - 1} runs (tokenizer load included); longest prompt {max(counts)} tokens, "
            f"passed={gate.passed}")
    print(text)
    save("fits_student.txt", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
