"""The LLM teacher's opening request of one iteration, measured: size, blocks, groups shown, cut markers.

    python bench/teacher_request.py RUN_DIR N [--iter-dir DIR] [--input-chars C]

Builds the request exactly as `--teacher llm:MODEL` would (llm_teacher.LlmTeacher._opening: the
skill's teacher sections + inputs_message within --teacher-input-chars) from a run dir stopped at
iteration N's teacher stop, sends nothing, and prints: the characters of the system message and
of the inputs, each input block's size, whether every group of `real` and `previous` is in the
weakness summary, and every [bracketed] count line. `--iter-dir` reads iteration N's inputs from
another directory (a copy of iter_N/ taken at the stop, before a teacher filled the skeletons).
Figures go to bench/out/teacher_request_iter<N>.txt.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _out import save  # noqa: E402

from selfimprove.llm_teacher import ApiSettings, LlmTeacher  # noqa: E402
from selfimprove.llm_teacher.api import DEFAULT_INPUT_CHARS  # noqa: E402
from selfimprove.rundir import RunDir, read_json_object  # noqa: E402
from selfimprove.teacher import make_context  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("n", type=int)
    ap.add_argument("--iter-dir", type=Path, default=None)
    ap.add_argument("--input-chars", type=int, default=DEFAULT_INPUT_CHARS)
    a = ap.parse_args()
    rd = RunDir(a.run_dir)
    ctx = make_context(rd, a.n)
    if a.iter_dir is not None:
        it = a.iter_dir.resolve()
        ctx = dataclasses.replace(ctx, iter_dir=it, failures_path=it / "failures.jsonl",
                                  analysis=read_json_object(it / "analysis.json") or {},
                                  weakness=read_json_object(it / "weakness_stats.json"))
    teacher = LlmTeacher(ApiSettings(model="measure", base_url="http://127.0.0.1:9/v1", input_chars=a.input_chars))
    system, user = (m["content"] for m in teacher._opening(ctx))
    lines = [f"run {rd.root} iteration {a.n}; --teacher-input-chars {a.input_chars}",
             f"opening request: {len(system) + len(user):,} characters = system (instructions) {len(system):,} "
             f"+ inputs {len(user):,}"]
    for m in re.finditer(r'<input name="([^"]+)">\n(.*?)\n</input>', user, flags=re.S):
        lines.append(f"  {m.group(1)}: {len(m.group(2)):,} characters")
    summary = re.search(r'<input name="weakness summary[^"]*">\n(.*?)\n</input>', user, flags=re.S)
    text = summary.group(1) if summary else ""
    for source in ("real", "previous"):
        stats = (ctx.weakness or {}).get(source)
        if not stats:
            continue
        shown = sum(1 for g in stats["groups"] if f"`{' '.join(g['group'].replace('|', chr(92) + '|').split())}`" in text)
        lines.append(f"weakness summary {source}: {shown} of {len(stats['groups'])} groups shown")
    lines.append(f"cut marker in the weakness summary: {'yes' if 'not shown' in text else 'no'}")
    lines += [f"count line: {c}" for c in re.findall(r"^\[.*\]$", user, flags=re.M)]
    report = "\n".join(lines)
    print(report)
    save(f"teacher_request_iter{a.n}.txt", report)


if __name__ == "__main__":
    main()
