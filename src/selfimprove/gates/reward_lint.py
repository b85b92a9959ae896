"""The reward-function lint: Non-negotiable 4 for the teacher's custom rewards.

    gate = lint_reward_functions(iter_dir / "rewards.py", report.custom_rewards, rows, report.failure_modes())

Each custom reward declared in the report front matter must:
  reward_missing             be defined at the top level of the source file;
  reward_signature           be exactly `async def fn(completion, answer, info=None, state=None, **kwargs) -> float`
                             (no decorators; parameter annotations are tolerated);
  reward_body_length         have <= 10 body lines, not counting docstring, comments and blank lines;
  reward_ground_truth        read ground truth only via `answer`: no use of `info`/`state` (or the strings
                             "info"/"state", which catches kwargs["info"]), no open/eval/exec/__import__/...;
  reward_failure_mode_comment carry a comment (in the body, or directly above the def) or docstring naming
                             a failure mode of the report (case-insensitive substring match);
  reward_weight / reward_total_weight   weigh <= 0.2 each and <= 0.3 together;
  reward_range               return a number in [0, 1] on every dataset row;
  reward_deterministic       return the same value when called twice on the same row.
Runtime problems have their own ids: reward_source (file unreadable / syntax
error), reward_import, reward_timeout, reward_call_error.

The teacher's module is never imported into this process: each function runs
in a fresh `python -I` subprocess (cwd = a temp dir, own session, killed on
timeout) that calls fn(completion=row["info"]["reasoning"], answer=row["answer"])
twice per row via asyncio and writes the values to a JSON file.

What is not covered: a function that reads ground truth from a module-level
global filled at import time, or through attribute chains on allowed names.
The static checks are a lint, not a sandbox.
"""

from __future__ import annotations

import ast
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path
from typing import Any

from ..engines import procs
from .common import GateFailure, GateReport
from .report import REWARD_MAX_TOTAL, REWARD_MAX_WEIGHT, CustomReward

GATE = "reward_lint"
MAX_BODY_LINES = 10
EXPECTED_SIGNATURE = "async def fn(completion, answer, info=None, state=None, **kwargs) -> float"
FORBIDDEN_NAMES = {"info", "state"}
FORBIDDEN_CALLS = {"open", "eval", "exec", "compile", "__import__", "globals", "locals", "vars"}
DEFAULT_TIMEOUT_S = 60.0

# Runs inside the subprocess. argv: spec.json out.json. Teacher prints go to stderr.
_RUNNER = r"""
import asyncio, importlib.util, inspect, json, os, sys
spec = json.load(open(sys.argv[1]))
sys.path.insert(0, os.path.dirname(spec["source"]))
out = {"import_error": None, "missing": False, "values": [], "errors": []}
sys.stdout = sys.stderr
def enc(v):
    if isinstance(v, (bool, int, float)):
        return float(v)
    return {"type": type(v).__name__}
try:
    s = importlib.util.spec_from_file_location("_selfimprove_lint_rewards", spec["source"])
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
except BaseException as e:
    out["import_error"] = f"{type(e).__name__}: {e}"[:300]
else:
    fn = getattr(mod, spec["name"], None)
    async def call(c, a):
        v = fn(completion=c, answer=a)
        return (await v) if inspect.isawaitable(v) else v
    async def main():
        for i, c, a in spec["rows"]:
            got = []
            for _ in range(2):
                try:
                    got.append(enc(await call(c, a)))
                except BaseException as e:
                    out["errors"].append([i, f"{type(e).__name__}: {e}"[:200]])
                    break
            else:
                out["values"].append([i, got[0], got[1]])
    if callable(fn):
        asyncio.run(main())
    else:
        out["missing"] = True
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
"""


# ---------------------------------------------------------------- static checks


def _signature_problems(fn: ast.AST) -> list[str]:
    problems = []
    if not isinstance(fn, ast.AsyncFunctionDef):
        problems.append("not async")
    if fn.decorator_list:
        problems.append("has decorators")
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args]
    if a.posonlyargs or names != ["completion", "answer", "info", "state"]:
        problems.append(f"parameters are ({', '.join(names)})")
    if len(a.defaults) != 2 or not all(isinstance(d, ast.Constant) and d.value is None for d in a.defaults):
        problems.append("info and state must default to None (and nothing else has a default)")
    if a.vararg is not None or a.kwonlyargs:
        problems.append("no *args or keyword-only parameters allowed")
    if a.kwarg is None or a.kwarg.arg != "kwargs":
        problems.append("must end with **kwargs")
    r = fn.returns
    if not ((isinstance(r, ast.Name) and r.id == "float") or (isinstance(r, ast.Constant) and r.value == "float")):
        problems.append("return annotation must be float")
    return problems


def _body_statements(fn: ast.AST) -> list[ast.stmt]:
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        body = body[1:]  # the docstring
    return body


def _body_lines(fn: ast.AST, source_lines: list[str]) -> int:
    lines: set[int] = set()
    for stmt in _body_statements(fn):
        lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return sum(1 for n in lines if source_lines[n - 1].strip() and not source_lines[n - 1].strip().startswith("#"))


def _ground_truth_problems(fn: ast.AST) -> list[str]:
    found = []
    for stmt in fn.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
                found.append(f"uses `{node.id}` (line {node.lineno})")
            elif isinstance(node, ast.Constant) and node.value in FORBIDDEN_NAMES:
                found.append(f"uses the key {node.value!r} (line {node.lineno})")
            elif isinstance(node, ast.Name) and node.id in FORBIDDEN_CALLS:
                found.append(f"calls `{node.id}` (line {node.lineno})")
    return found


def _comments_by_line(source: str) -> dict[int, str]:
    out: dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                out[tok.start[0]] = tok.string.lstrip("#").strip()
    except (tokenize.TokenError, IndentationError):
        pass  # ast.parse succeeded, so this is unreachable in practice
    return out


def _function_comment_text(fn: ast.AST, source_lines: list[str], comments: dict[int, str]) -> str:
    """Comments inside the function, the comment block directly above it, and its docstring."""
    start = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
    parts = [comments[n] for n in range(start, (fn.end_lineno or start) + 1) if n in comments]
    n = start - 1
    while n >= 1 and source_lines[n - 1].strip().startswith("#"):
        parts.append(comments.get(n, ""))
        n -= 1
    parts.append(ast.get_docstring(fn) or "")
    return " ".join(" ".join(parts).lower().split())


# ---------------------------------------------------------------- runtime checks


def _run_function(source_path: Path, name: str, calls: list[list[Any]], timeout_s: float,
                  python: str | None = None) -> dict[str, Any]:
    """Call `name` from the teacher's file in a subprocess of `python` (the env interpreter, where the
    engine imports the rewards; default this one); {"timeout": True} when it hangs."""
    with tempfile.TemporaryDirectory(prefix="selfimprove-reward-lint-") as tmp:
        spec, out = Path(tmp, "spec.json"), Path(tmp, "out.json")
        spec.write_text(json.dumps({"source": str(source_path.resolve()), "name": name, "rows": calls}))
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0")
        try:  # under the reaper: a timeout, or the gate's end, leaves nothing of the teacher's code running
            proc = procs.run_child([python or sys.executable, "-I", "-c", _RUNNER, str(spec), str(out)],
                                   cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"timeout": True}
        if not out.is_file():
            tail = (proc.stderr or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
            return {"import_error": f"runner died: {tail[0][:300]}", "values": [], "errors": []}
        return json.loads(out.read_text())


def _out_of_range(v: Any) -> bool:
    return not isinstance(v, float) or math.isnan(v) or not 0.0 <= v <= 1.0


def lint_reward_functions(
    source_path: Path,
    declared: list[CustomReward],
    rows: list[dict],
    failure_modes: set[str],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    python: str | None = None,
) -> GateReport:
    """Lint every declared custom reward statically and by running it on the dataset's rows."""
    failures: list[GateFailure] = []

    def fail(rule: str, message: str, rows_: list[int] | None = None) -> None:
        failures.append(GateFailure(rule=rule, message=message, rows=rows_ or []))

    for r in declared:
        if not 0 < r.weight <= REWARD_MAX_WEIGHT:
            fail("reward_weight", f"{r.name}: weight {r.weight} not in (0, {REWARD_MAX_WEIGHT}]")
    total = sum(r.weight for r in declared)
    if total > REWARD_MAX_TOTAL + 1e-9:
        fail("reward_total_weight", f"custom reward weights sum to {total:.3g}; max {REWARD_MAX_TOTAL}")
    if not declared:
        return GateReport.build(GATE, failures, {"functions": {}})

    source_path = Path(source_path)
    try:
        source = source_path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(source_path))
    except (OSError, UnicodeDecodeError, SyntaxError) as e:
        fail("reward_source", f"{source_path}: cannot read or parse ({type(e).__name__}: {e})")
        return GateReport.build(GATE, failures, {"functions": {}})
    source_lines = source.splitlines()
    comments = _comments_by_line(source)
    top_level = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    modes = {" ".join(m.lower().split()) for m in failure_modes if m.strip()}

    calls = [
        [i, row["info"]["reasoning"], row["answer"]]
        for i, row in enumerate(rows)
        if isinstance(row, dict) and isinstance(row.get("answer"), str)
        and isinstance(row.get("info"), dict) and isinstance(row["info"].get("reasoning"), str)
    ]
    stats: dict[str, Any] = {}
    import_failed = False
    for r in declared:
        fn = top_level.get(r.name)
        if fn is None:
            fail("reward_missing", f"{r.name}: no top-level function of that name in {source_path.name}")
            continue
        problems = _signature_problems(fn)
        if problems:
            fail("reward_signature", f"{r.name}: {'; '.join(problems)}; expected `{EXPECTED_SIGNATURE}`")
        n_lines = _body_lines(fn, source_lines)
        if n_lines > MAX_BODY_LINES:
            fail("reward_body_length", f"{r.name}: body has {n_lines} lines; max {MAX_BODY_LINES} (docstring, comments, blanks excluded)")
        leaks = _ground_truth_problems(fn)
        if leaks:
            fail("reward_ground_truth", f"{r.name}: ground truth must come only from `answer`; " + "; ".join(leaks))
        text = _function_comment_text(fn, source_lines, comments)
        if not any(m in text for m in modes):
            fail("reward_failure_mode_comment", f"{r.name}: no comment in or directly above the function names a failure mode of the report (e.g. {', '.join(sorted(modes)[:3]) or 'none defined'})")

        if import_failed:
            continue
        result = _run_function(source_path, r.name, calls, timeout_s, python)
        if result.get("timeout"):
            fail("reward_timeout", f"{r.name}: did not finish {len(calls)} x 2 calls within {timeout_s:g}s")
            continue
        if result.get("import_error"):
            import_failed = True  # the same module fails for every function: report once
            fail("reward_import", f"{source_path.name}: importing failed ({result['import_error']})")
            continue
        if result.get("errors"):
            errs = result["errors"]
            fail("reward_call_error", f"{r.name}: raised on {len(errs)} row(s), e.g. row {errs[0][0]}: {errs[0][1]}", [e[0] for e in errs])
        values = result.get("values", [])
        bad = [i for i, v1, v2 in values if _out_of_range(v1) or _out_of_range(v2)]
        if bad:
            fail("reward_range", f"{r.name}: {len(bad)} row(s) returned a non-number or a value outside [0, 1]", bad)
        unstable = [i for i, v1, v2 in values if v1 != v2 and not (_out_of_range(v1) and _out_of_range(v2))]
        if unstable:
            fail("reward_deterministic", f"{r.name}: {len(unstable)} row(s) gave different values on two identical calls", unstable)
        nums = [v for _, v1, v2 in values for v in (v1, v2) if isinstance(v, float) and not math.isnan(v)]
        stats[r.name] = {"calls": 2 * len(values), "min": min(nums, default=None), "max": max(nums, default=None)}
    return GateReport.build(GATE, failures, {"functions": stats, "rows_called": len(calls)})
