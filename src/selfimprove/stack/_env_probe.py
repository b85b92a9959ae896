"""Probe a classic verifiers environment from a FRESH interpreter and report as JSON.

    echo '{"op": "introspect", "env_id": "selfimprove-arith", "env_args": {}}' \\
        | python src/selfimprove/stack/_env_probe.py

`verifiers_classic.py` runs this module in a subprocess so that a module imported
earlier (or an install that happened after this process started) can't lie about
what `load_environment(env_id)` returns today.

Requests (one JSON object on stdin):
    {"op": "introspect", "env_id": str, "env_args": {...}, "n_samples": 3}
    {"op": "parse", "env_id": str, "env_args": {...}, "texts": [str, ...]}
    {"op": "eval_ngrams", "env_id": str, "env_args": {...}, "hasher_file": path,
     "fallback_examples": int}  (hashes only; without an eval split, of the first n train rows)

Reply: ONE JSON object on the original stdout, `{"ok": true, "result": {...}}` or
`{"ok": false, "kind": "not_importable"|"load_failed"|"dataset_failed"|"bad_request",
"message": "<one line>"}`. While the environment runs, fd 1 points at stderr, so
whatever it prints can't corrupt the reply.

Eval rows are sealed: this script builds the eval split only to count it (or to
hash it, in eval_ngrams). No field of an eval row is read, printed or returned.

Only the standard library and verifiers are imported here (no selfimprove code),
and it is run by file path: the target interpreter (e.g. the training engine's
venv) need not have selfimprove installed. Neither this file's directory nor the
current directory is put on sys.path, as for an installed entry point: an env
counts only if it is installed (or on PYTHONPATH).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import random
import re
import sys
import traceback
from typing import Any

# Run by path, Python puts this file's directory first on sys.path; drop it so
# sibling modules (hub.py, ...) can't shadow an environment's module.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

TEXT_LIMIT = 1500  # chars kept of a sample's question / answer / info strings
LIST_LIMIT = 20  # items kept of a list inside a sample's info


def env_module_name(env_id: str) -> str:
    """verifiers' rule: the last path segment, dashes to underscores."""
    return env_id.replace("-", "_").split("/")[-1]


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0].strip() if text else ""
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


# ---------------------------------------------------------------- loading


class ProbeError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


def load_env(env_id: str, env_args: dict[str, Any]) -> Any:
    module = env_module_name(env_id)
    if importlib.util.find_spec(module) is None:
        raise ProbeError("not_importable", f"no module named '{module}'")
    # Import the module ourselves first: verifiers turns any ImportError (also a
    # missing dependency of the env) into "Could not import ...", losing the cause.
    try:
        importlib.import_module(module)
    except Exception as e:
        raise ProbeError("load_failed", f"importing module '{module}' failed: {first_line(e)}") from e
    import verifiers as vf

    try:
        return vf.load_environment(env_id, **env_args)
    except Exception as e:
        cause = e.__cause__ if isinstance(e, RuntimeError) and e.__cause__ is not None else e
        raise ProbeError("load_failed", f"load_environment('{env_id}') failed: {first_line(cause)}") from e


# ---------------------------------------------------------------- introspection


def callable_name(fn: Any) -> str:
    if hasattr(fn, "func") and not hasattr(fn, "__name__"):  # functools.partial
        fn = fn.func
    return getattr(fn, "__name__", None) or type(fn).__name__


def reaches_parser(func: Any, parser: Any) -> bool:
    """True when a reward function uses a parser of the env's parser class itself, through a
    closure cell or a module global (followed into the helper functions it names), rather than
    the `parser` argument the rubric passes it."""
    todo, seen = [func], set()
    while todo:
        f = todo.pop()
        f = getattr(f, "__func__", f)  # a bound method
        f = f.func if hasattr(f, "func") and not hasattr(f, "__code__") else f  # functools.partial
        code = getattr(f, "__code__", None)
        if code is None or id(f) in seen:
            continue
        seen.add(id(f))
        values = []
        for cell in getattr(f, "__closure__", None) or ():
            try:
                values.append(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
        names = getattr(f, "__globals__", {})
        values += [names[n] for n in code.co_names if n in names]
        for v in values:
            if v is parser or type(v) is type(parser):
                return True
            if hasattr(v, "__code__") or hasattr(v, "__func__"):  # a helper it calls
                todo.append(v)
    return False


def class_chain(obj: Any) -> list[str]:
    """Names of the object's class and its bases, most specific first (without `object`)."""
    return [c.__name__ for c in type(obj).__mro__ if c is not object]


def parser_config(parser: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {"module": type(parser).__module__, "bases": class_chain(parser)[1:]}
    fields = getattr(parser, "_fields", None)
    if isinstance(fields, list):  # XMLParser: [(canonical, [alternatives])]
        out = []
        for item in fields:
            if isinstance(item, tuple) and len(item) == 2:
                canonical, alts = item
                out.append(canonical if list(alts) == [canonical] else list(alts))
            else:
                out.append(item)
        cfg["fields"] = out
    if hasattr(parser, "answer_field"):
        cfg["answer_field"] = parser.answer_field
    fn = getattr(parser, "extract_fn", None)
    if fn is not None:
        cfg["extract_fn"] = callable_name(fn)
        cfg["extract_fn_module"] = getattr(fn, "__module__", None)
        probe = "selfimprove \u2063probe 7"
        try:
            cfg["extract_fn_is_identity"] = fn(probe) == probe
        except Exception:
            cfg["extract_fn_is_identity"] = False
    return cfg


def rubric_funcs(rubric: Any) -> list[dict[str, Any]]:
    """Names and weights of a (leaf) rubric's reward functions: `funcs`/`weights`,
    falling back to the older `reward_funcs`/`reward_weights`."""
    funcs = getattr(rubric, "funcs", None)
    weights = getattr(rubric, "weights", None)
    if not funcs:
        funcs = getattr(rubric, "reward_funcs", None) or []
        weights = getattr(rubric, "reward_weights", None)
    funcs = list(funcs)
    # verifiers checks the lengths match; an older or hand-built rubric may not: default 1.0
    weights = (list(weights or []) + [1.0] * len(funcs))[: len(funcs)]
    return [{"name": callable_name(f), "weight": float(w)} for f, w in zip(funcs, weights, strict=True)]


def leaf_rubrics(rubric: Any) -> list[Any]:
    subs = getattr(rubric, "rubrics", None)
    if isinstance(subs, (list, tuple)) and subs:
        out = []
        for sub in subs:
            out.extend(leaf_rubrics(sub))
        return out
    return [rubric]


def unwrap_rubric(rubric: Any) -> tuple[Any, list[dict[str, Any]] | None]:
    """(the rubric that scores, the group's members or None).

    verifiers wraps the env's rubric in a RubricGroup (e.g. MultiTurnEnv adds a
    zero-weight `num_turns` monitor). The scoring rubric is the first leaf with a
    non-zero weight, else the first leaf with any function, else the first leaf.
    """
    leaves = leaf_rubrics(rubric)
    if len(leaves) == 1 and leaves[0] is rubric:
        return rubric, None
    group = [{"rubric_class": type(r).__name__, "funcs": rubric_funcs(r)} for r in leaves]
    main = next((r for r in leaves if any(f["weight"] for f in rubric_funcs(r))), None)
    main = main or next((r for r in leaves if rubric_funcs(r)), None) or leaves[0]
    return main, group


def build_split(env: Any, which: str) -> Any:
    """The built train/eval dataset, or None when the env has none (never the other split)."""
    builder = getattr(env, f"build_{which}", None)
    if callable(builder):
        return builder()
    return getattr(env, which, None)  # older verifiers: datasets are attributes


def clip(value: Any, limit: int = TEXT_LIMIT) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"... [{len(value) - limit} more chars]"
    if isinstance(value, dict):
        return {str(k): clip(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [clip(v, limit) for v in list(value)[:LIST_LIMIT]]
        if len(value) > LIST_LIMIT:
            items.append(f"... [{len(value) - LIST_LIMIT} more items]")
        return items
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return clip(str(value), limit)


def message_text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else ""


def train_sample(row: dict[str, Any]) -> dict[str, Any]:
    question = row.get("question")
    if question is None and isinstance(row.get("prompt"), list):
        users = [m for m in row["prompt"] if (m.get("role") if isinstance(m, dict) else None) == "user"]
        question = message_text(users[-1]) if users else ""
    answer = answer_text(row.get("answer"))
    info = row.get("info")
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except json.JSONDecodeError:
            pass
    if info is None:
        info = {}
    if not isinstance(info, dict):
        info = {"value": info}
    return {"question": clip(str(question or "")), "answer": clip(answer), "info": clip(info)}


ANSWER_ROWS = 2000  # TRAIN rows whose reference answers are measured (all of them when fewer)


def answer_chars(answers: list[str]) -> dict[str, int] | None:
    """hub_env.json `train_answer_chars`: how long the reference answers are, in characters (an upper
    bound on their tokens for ASCII text under a BPE tokenizer; exact for a character-level one). The
    generated config's completion budget follows `longest` (phases/completion_budget.py)."""
    if not answers:
        return None
    lengths = sorted(len(a) for a in answers)
    return {"rows": len(lengths), "longest": lengths[-1], "median": lengths[len(lengths) // 2]}


def sampled_indices(first: int, size: int, k: int = ANSWER_ROWS) -> list[int]:
    """Up to k row indices in [first, size), the same ones on every call (seeded): the rows before
    `first` are the sealed evaluated rows of an env with no eval split."""
    pool = range(first, size)
    return list(pool) if len(pool) <= k else sorted(random.Random(0).sample(pool, k))


def answer_text(answer: Any) -> str:
    return answer if isinstance(answer, str) else ("" if answer is None else json.dumps(answer, default=str))


def system_prompt_from_rows(ds: Any) -> str | None:
    if ds is None or len(ds) == 0 or "prompt" not in ds.column_names:
        return None
    prompt = ds[0]["prompt"]
    if isinstance(prompt, list) and prompt:
        first = prompt[0]
        if (first.get("role") if isinstance(first, dict) else None) == "system":
            return message_text(first)
    return None


def evaluated_ids(env: Any, train: Any, n: int) -> list[Any]:
    """The example ids of the train rows the engine evaluates when the env has no eval split: verifiers'
    get_eval_dataset(n) falls back to get_dataset(n), the first n rows (ids only: they are sealed)."""
    if callable(getattr(env, "get_dataset", None)):
        ds = env.get_dataset(n=n)
    else:  # older verifiers: datasets are attributes
        ds = train.select(range(min(n, len(train)))) if n > 0 else train
    if "example_id" in ds.column_names:
        return [v if isinstance(v, (int, str)) else str(v) for v in ds["example_id"]]
    return list(range(len(ds)))


def introspect(env_id: str, env_args: dict[str, Any], n_samples: int, evaluated_examples: int = -1) -> dict[str, Any]:
    env = load_env(env_id, env_args)
    warnings: list[str] = []
    parser = env.parser
    main, group = unwrap_rubric(env.rubric)

    try:
        train = build_split(env, "dataset")
    except Exception as e:
        raise ProbeError("dataset_failed", f"building the train dataset of '{env_id}' failed: {first_line(e)}") from e
    try:
        evalset = build_split(env, "eval_dataset")
    except Exception as e:
        raise ProbeError("dataset_failed", f"building the eval dataset of '{env_id}' failed: {first_line(e)}") from e
    train_size = len(train) if train is not None else None
    eval_size = len(evalset) if evalset is not None else None  # counted, never read
    if train is None:
        warnings.append("the environment has no train dataset: no answer-format samples")
    if evalset is None:
        warnings.append("the environment has no eval dataset: verifiers evaluates on the first train rows "
                        "(hub_env.json evaluated_rows; baseline holds them out of training, and the dataset gate "
                        "indexes them for decontamination)")

    # Without an eval split the first rows are the evaluated ones: sealed, so no sample is drawn from them
    # and only their ids leave this process (the tool keeps their rollouts from the teacher by id).
    sealed_ids: list[Any] | None = None
    first_unsealed = 0
    if evalset is None and train is not None:
        sealed_ids = evaluated_ids(env, train, evaluated_examples)
        first_unsealed = len(sealed_ids)
    samples = []
    if train_size and train_size > first_unsealed:
        samples = [train_sample(train[i]) for i in sampled_indices(first_unsealed, train_size, n_samples)]
    lengths = None
    if train_size and "answer" in train.column_names:
        picked = sampled_indices(first_unsealed, train_size)
        column = train.select(picked)["answer"] if picked else []
        lengths = answer_chars([answer_text(a) for a in column])

    system_prompt = getattr(env, "system_prompt", None)
    system_prompt_source = "env.system_prompt"
    if not system_prompt:
        from_rows = system_prompt_from_rows(train)
        if from_rows:
            system_prompt, system_prompt_source = from_rows, "train prompt[0]"
            warnings.append("env.system_prompt is empty; the system prompt was read from the train rows' prompt")
        else:
            system_prompt, system_prompt_source = None, None

    rubric_parser = getattr(main, "parser", None)
    if rubric_parser is not None and type(rubric_parser) is not type(parser):
        # Only a reward function that takes the rubric's `parser` argument gets the rubric's parser;
        # one that calls the env's parser itself (verifiers' reverse_text) is told apart, not warned about.
        funcs = list(getattr(main, "funcs", None) or getattr(main, "reward_funcs", None) or [])
        given = [callable_name(f) for f in funcs if not reaches_parser(f, parser)]
        if given or not funcs:
            warnings.append(
                f"the rubric's parser ({type(rubric_parser).__name__}) differs from the env's parser "
                f"({type(parser).__name__}); {', '.join(given) or 'its reward functions'} "
                "score with the rubric's"
            )

    try:
        import verifiers

        vf_version = getattr(verifiers, "__version__", None)
    except Exception:
        vf_version = None
    return {
        "env_id": env_id,
        "env_args": env_args,
        "module": env_module_name(env_id),
        "module_file": getattr(sys.modules.get(env_module_name(env_id)), "__file__", None),
        "env_class": type(env).__name__,
        "env_bases": class_chain(env)[1:],
        "parser_class": type(parser).__name__,
        "parser_config": parser_config(parser),
        "rubric_class": type(main).__name__,
        "rubric_funcs": rubric_funcs(main),
        "rubric_group": group,
        "system_prompt": system_prompt,
        "system_prompt_source": system_prompt_source,
        "train_size": train_size,
        "eval_size": eval_size,
        "train_samples": samples,
        "train_answer_chars": lengths,
        "evaluated_example_ids": sealed_ids,
        "warnings": warnings,
        "verifiers_version": vf_version,
    }


def parse_texts(env_id: str, env_args: dict[str, Any], texts: list[str]) -> dict[str, Any]:
    """Run the env's own parser over completions, as its rubric would see them."""
    env = load_env(env_id, env_args)
    parser = env.parser
    answers: list[str | None] = []
    errors: list[str | None] = []
    for text in texts:
        try:
            got = parser.parse_answer([{"role": "assistant", "content": text}])
            answers.append(None if got is None else str(got))
            errors.append(None)
        except Exception as e:
            answers.append(None)
            errors.append(first_line(e))
    return {"parser_class": type(parser).__name__, "answers": answers, "errors": errors}


def eval_ngrams(env_id: str, env_args: dict[str, Any], hasher_file: str, fallback_examples: int = -1) -> dict[str, Any]:
    """The questions the engine EVALUATES, reduced to n-gram hashes here, so no eval text leaves this process.

    With an eval split, all of it. Without one, verifiers' classic
    `get_eval_dataset(n)` falls back to `get_dataset(n)`: the first n train rows
    (no seed: the CPU engine and the seed-era orchestrator pass none). Those are
    the rows every arm is scored on, so they are what generated data must avoid;
    `fallback_examples` is that n (the run's eval examples; -1 = the whole split).
    `hasher_file` is selfimprove's gates/ngram_hash.py (standard library only), loaded by
    path: the same hashing the dataset gate applies to generated rows.
    """
    spec = importlib.util.spec_from_file_location("selfimprove_ngram_hash", hasher_file)
    hasher = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hasher)
    env = load_env(env_id, env_args)
    ds = build_split(env, "eval_dataset")
    source = "eval_split"
    if ds is None:
        source = "train_fallback"
        if callable(getattr(env, "get_dataset", None)):
            ds = env.get_dataset(n=fallback_examples)
        else:  # older verifiers: datasets are attributes
            ds = build_split(env, "dataset")
            if ds is not None and fallback_examples > 0:
                ds = ds.select(range(min(fallback_examples, len(ds))))
    if ds is None:
        return {**hasher.eval_ngram_index([]).to_json(), "source": source}

    def questions():
        for row in ds:
            q = row.get("question")
            if not isinstance(q, str):
                users = [m for m in (row.get("prompt") or []) if isinstance(m, dict) and m.get("role") == "user"]
                q = message_text(users[-1]) if users else ""
            yield q

    return {**hasher.eval_ngram_index(questions()).to_json(), "source": source}


# ---------------------------------------------------------------- main


def handle(request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    env_id = request.get("env_id")
    env_args = request.get("env_args") or {}
    if not isinstance(env_id, str) or not env_id or not isinstance(env_args, dict):
        raise ProbeError("bad_request", "request needs env_id (str) and env_args (object)")
    if op == "introspect":
        return introspect(env_id, env_args, int(request.get("n_samples", 3)), int(request.get("evaluated_examples", -1)))
    if op == "parse":
        texts = request.get("texts")
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise ProbeError("bad_request", "parse needs texts: a list of strings")
        return parse_texts(env_id, env_args, texts)
    if op == "eval_ngrams":
        return eval_ngrams(env_id, env_args, str(request.get("hasher_file")), int(request.get("fallback_examples", -1)))
    raise ProbeError("bad_request", f"unknown op {op!r}")


def main() -> int:
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # anything the env prints goes to stderr
    sys.stdout = sys.stderr
    try:
        request = json.loads(sys.stdin.read() or "{}")
        reply: dict[str, Any] = {"ok": True, "result": handle(request)}
        code = 0
    except ProbeError as e:
        reply, code = {"ok": False, "kind": e.kind, "message": re.sub(r"\s+", " ", e.message)}, 2
    except Exception as e:  # a bug or an env failing in a way we did not foresee
        traceback.print_exc()
        reply, code = {"ok": False, "kind": "load_failed", "message": first_line(e)}, 2
    with os.fdopen(reply_fd, "w", encoding="utf-8") as out:
        out.write(json.dumps(reply, default=str) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
