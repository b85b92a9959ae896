"""Template signatures, aliases of earlier iterations, and eval-split overlap (which must never leak eval text)."""

from __future__ import annotations

import pytest
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from gate_fixtures import alias, clone, make_rows, prior_rows

from selfimprove.gates import EvalNgramIndex, check_eval_overlap, check_near_duplicates, eval_ngram_index, template_signature
from selfimprove.gates.dedup import find_eval_overlap
from selfimprove.gates import ngram_hash

BASE_ROWS = make_rows()
PRIOR = {1: prior_rows(300), 2: prior_rows(50)}


@pytest.mark.parametrize("a,b", [
    ("Sally has 5 apples.", "Sarah has 7 apples"),
    ("Tom has seven apples. He eats 2.", "Mary has 3 apples. She eats one!"),
    ("Sally Smith paid $1,250.50 on the 3rd day.", "Bob paid $7 on the 21st day."),
    ('Reverse the text: "hello world"', "Reverse the text: `good day`"),
    ("Let A be a set with 4 elements.", "Let B be a set with 9 elements."),
    ("  WHAT is 3 +  4? ", "what is 10 + 2"),
])
def test_aliases_share_a_signature(a, b):
    """Swapping names, numbers, pronouns, short literals, case and spacing keeps the signature."""
    assert template_signature(a) == template_signature(b)


@pytest.mark.parametrize("a,b", [
    ("Sally has 5 apples.", "Sally has 5 pears."),  # cover story changed
    ("Sally has 5 apples.", "Sally had 5 apples."),
    ("What is 3 + 4?", "What is 3 * 4?"),  # operator changed
    ("How many apples are left?", "What share of apples is left?"),
])
def test_structural_changes_change_the_signature(a, b):
    assert template_signature(a) != template_signature(b)


def test_signature_example():
    assert template_signature("Sally has 5 apples. She eats two.") == "<name> has <num> apples <pron> eats <num>"


def test_valid_rows_have_no_prior_aliases():
    """The baseline passes against rows of earlier iterations and has one signature per row."""
    g = check_near_duplicates(BASE_ROWS, PRIOR)
    assert g.passed, g.summary()
    assert g.stats["distinct_signatures"] == len(BASE_ROWS)
    assert all(b["rows"] == b["distinct_signatures"] == 100 for b in g.stats["per_bucket"].values())


def _alias_prior(indices, prior=PRIOR[1]):
    """Replace rows by prior rows with a different name/number: same template, new surface."""
    def apply(rows):
        for k, i in enumerate(indices):
            rows[i]["question"] = alias(prior[k]["question"])
            assert rows[i]["question"] != prior[k]["question"]
        return rows
    return apply


def test_repeat_of_prior_fails_alone():
    """A verbatim (case/space-normalised) repeat of an earlier iteration's question fails even once."""
    rows = clone(BASE_ROWS)
    rows[3]["question"] = "  " + PRIOR[2][7]["question"].upper()
    g = check_near_duplicates(rows, PRIOR)
    assert g.failed_rules == {"repeat_of_prior"}, g.summary()
    assert g.failures[0].rows == [3] and "iter_1: 1" in g.failures[0].message  # first iteration that had it


def test_paraphrase_share_above_threshold_fails_alone():
    """Aliasing more than 2% of rows (here 20 = 3.3%) fails `paraphrase_of_prior` with those rows."""
    idx = list(range(0, 600, 30))
    g = check_near_duplicates(_alias_prior(idx)(clone(BASE_ROWS)), PRIOR)
    assert g.failed_rules == {"paraphrase_of_prior"}, g.summary()
    assert g.failures[0].rows == idx


def test_paraphrase_share_below_threshold_passes_but_is_reported():
    """A few chance collisions (5 rows < 2%) pass, and stats still list them."""
    idx = [1, 2, 3, 4, 5]
    g = check_near_duplicates(_alias_prior(idx)(clone(BASE_ROWS)), PRIOR)
    assert g.passed, g.summary()
    assert g.stats["paraphrase_rows"] == idx


def test_template_free_questions_compare_by_exact_repeat_only():
    """Bare expressions carry no template: new numbers are new problems; only exact repeats fail."""
    prior = {1: [{"question": f"{a}+{a + 3}"} for a in range(10, 60)]}
    rows = [{"question": f"{a}+{a + 5}"} for a in range(10, 60)]
    assert check_near_duplicates(rows, prior).passed
    rows[0]["question"] = "10+13"
    g = check_near_duplicates(rows, prior)
    assert g.failed_rules == {"repeat_of_prior"}
    assert g.stats["uninformative_signatures"] == 50


def test_within_dataset_clones_show_in_bucket_stats():
    """Clones that differ only in names/numbers count as one signature in per-bucket diversity."""
    rows = clone(BASE_ROWS)
    for i in range(1, 100):
        rows[i]["question"] = re.sub(r"\d+", lambda m: str(int(m.group()) + i), rows[0]["question"])
    g = check_near_duplicates(rows, PRIOR)
    bucket = f"{rows[0]['info']['domain']} / {rows[0]['info']['sub_domain']}"
    assert g.stats["per_bucket"][bucket] == {"rows": 100, "distinct_signatures": 1}
    assert g.passed  # within-dataset diversity is a statistic, not a rule


# ---------------------------------------------------------------- eval overlap

CANARY = "CANARY-7f3a1c-do-not-leak"


def eval_questions():
    yield f"The {CANARY} wizard brewed 12 potions and sold 5 of them at the market before sunset; how many potions are left?"
    yield "91-(37-12)"
    for k in range(200):
        yield f"Eval item about a lighthouse keeper who logs {k} ships passing the northern cape every single week."


def test_valid_rows_do_not_overlap_eval():
    g = check_eval_overlap(BASE_ROWS, eval_questions())
    assert g.passed, g.summary()
    assert g.stats["eval_questions"] == 202 and g.stats["flagged_rows"] == 0


def test_copied_eval_question_is_flagged_without_leaking_eval_text_or_rows():
    """A generated row that copies an eval question is found by index for the tool's own drop; the gate
    report counts it and names neither the eval text nor the row (issue 23.5: row ids are an oracle)."""
    rows = clone(BASE_ROWS)
    rows[7]["question"] = next(eval_questions()).replace("12", "13")  # near-verbatim copy
    rows[8]["question"] = "91 - (37 - 12)"  # short question: compared whole
    assert find_eval_overlap(rows, eval_ngram_index(eval_questions())).overlapping == [7, 8]
    g = check_eval_overlap(rows, eval_questions())
    assert g.failed_rules == {"eval_overlap"}
    assert g.failures[0].rows == [] and g.failures[0].message.startswith("2 generated row(s)")
    dumped = g.model_dump_json() + g.summary()
    assert CANARY not in dumped and "wizard" not in dumped and "lighthouse" not in dumped
    assert "rows 7" not in dumped and "[7, 8]" not in dumped


def test_shared_boilerplate_below_threshold_is_not_flagged():
    """Sharing one 8-word phrase with an eval question is counted, not flagged (< 50% of the row's 8-grams)."""
    rows = clone(BASE_ROWS)
    rows[0]["question"] += " Note: a lighthouse keeper who logs 3 ships passing the northern cape."
    g = check_eval_overlap(rows, eval_questions())
    assert g.passed, g.summary()
    assert g.stats["rows_with_any_shared_ngram"] == 1


def test_eval_question_embedded_in_a_sentence_is_flagged():
    """A whole eval question inside a frame is caught (issue 13.3): a long one whatever surrounds it,
    a short one (a bare expression) when the frame adds no number or operator; no eval text is shown."""
    long_q = next(eval_questions())
    rows = clone(BASE_ROWS)
    # Long frames: under 50% of these rows' 8-grams are eval 8-grams, so only containment sees them.
    intro = "Here is a practice question for the weekly quiz that the whole class will discuss together on Friday:"
    outro = "Give the final number only, with a short justification of each of the steps you take to reach it."
    rows[3]["question"] = f"{intro} {long_q} {outro}"
    rows[4]["question"] = f"{intro} {long_q.upper()} Round to 2 places and explain in 3 steps. {outro}"
    rows[5]["question"] = "Compute 91-(37-12) and give the result."
    rows[6]["question"] = "What is 91 - ( 37 - 12 )?"
    found = find_eval_overlap(rows, eval_ngram_index(eval_questions()))
    assert (found.overlapping, found.containing, found.rows) == ([], [3, 4, 5, 6], [3, 4, 5, 6])
    g = check_eval_overlap(rows, eval_questions())
    assert g.failed_rules == {"eval_contained"}, g.summary()
    assert g.failures[0].rows == [] and g.failures[0].message.startswith("4 generated row(s)")
    assert g.stats["contained_rows"] == 4
    dumped = g.model_dump_json() + g.summary()
    assert CANARY not in dumped and "wizard" not in dumped


@pytest.mark.parametrize("question", [
    "Compute 5+91-(37-12) and give the result.",  # a bigger problem with the eval one as a part
    "What is (91-(37-12))*2?",
    "Compute 91-(37-125) and give the result.",  # 125 is not 12: token boundaries hold
    "Compute 191-(37-12) and give the result.",
    "Sold 5 of them at the market before sunset; how many potions are left?",  # part of a long eval question
])
def test_short_or_partial_eval_matches_are_not_flagged(question):
    """Containment must not fire on problems that merely include a short eval expression, or on part of one."""
    rows = clone(BASE_ROWS)
    rows[5]["question"] = question
    g = check_eval_overlap(rows, eval_questions())
    assert "eval_contained" not in g.failed_rules and g.stats["contained_rows"] == 0, g.summary()


def test_containment_needs_three_tokens_unless_whole_row():
    """A 1-2 token eval question ("42", "x y") counts only when it is the whole row."""
    rows = clone(BASE_ROWS)
    rows[0]["question"] = "What is 42?"
    assert check_eval_overlap(rows, ["42", "hello there"]).passed
    rows[1]["question"] = "Hello, there!"
    assert not check_eval_overlap(rows, ["42", "hello there"]).passed
    assert find_eval_overlap(rows, eval_ngram_index(["42", "hello there"])).rows == [1]


def test_eval_iterable_is_consumed_once():
    """Eval questions may be a one-shot generator (streamed from the hub, never stored)."""
    gen = eval_questions()
    check_eval_overlap(BASE_ROWS[:5], gen)
    assert next(gen, None) is None


def test_flagged_share_tolerance():
    rows = clone(BASE_ROWS)
    rows[8]["question"] = "91-(37-12)"
    assert not check_eval_overlap(rows, eval_questions()).passed
    assert check_eval_overlap(rows, eval_questions(), max_flagged_share=0.01).passed


def test_prehashed_index_gives_the_same_verdict_and_carries_no_text():
    """An EvalNgramIndex (built where eval rows are read) round-trips through JSON and gates identically."""
    rows = clone(BASE_ROWS)
    rows[7]["question"] = next(eval_questions())
    index = EvalNgramIndex.from_json(json.loads(json.dumps(eval_ngram_index(eval_questions()).to_json())))
    assert CANARY not in json.dumps(index.to_json())
    by_index, by_text = check_eval_overlap(rows, index), check_eval_overlap(rows, eval_questions())
    assert by_index.model_dump() == by_text.model_dump()
    assert by_index.failures[0].message.startswith("1 generated row(s)")
    assert find_eval_overlap(rows, index).rows == [7]


def test_ngram_hash_is_standalone():
    """ngram_hash.py imports only the standard library, so a probe without selfimprove can load it by path."""
    tree = ast.parse(Path(ngram_hash.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module}
    assert not any(isinstance(n, ast.ImportFrom) and n.level > 0 for n in ast.walk(tree))
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
    code = ("import importlib.util, sys, json; s = importlib.util.spec_from_file_location('h', sys.argv[1]); "
            "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); "
            "print(json.dumps(m.eval_ngram_index(['what is 3 + 4']).to_json()))")
    out = subprocess.run([sys.executable, "-I", "-c", code, ngram_hash.__file__], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == eval_ngram_index(["what is 3 + 4"]).to_json()


def test_index_version_mismatch_is_refused():
    data = eval_ngram_index(["a b c"]).to_json()
    data["version"] = 99
    with pytest.raises(ValueError, match="rebuild"):
        EvalNgramIndex.from_json(data)
