"""Near-duplicate and contamination gates over generated questions.

    check_near_duplicates(rows, {1: iter1_rows, 2: iter2_rows})  # aliases of earlier iterations
    check_eval_overlap(rows, eval_questions)                      # shared n-grams with the eval split (counts only)
    find_eval_overlap(rows, index).rows                           # which rows: for the tool's own drop (decontam.py)

1. Aliases. The skill's procedure forbids "trivial paraphrases of prior iters' rows" and
   calls "Sally->Sarah, 5->7" an alias. `template_signature` erases exactly
   what an alias changes (numbers, number words, capitalised names, gendered
   pronouns, short quoted literals, punctuation, case), so two questions
   from one template with fresh names and numbers get the same signature.
   Rules:
   - `repeat_of_prior`: a question equal to an earlier iteration's question
     (case/whitespace-normalised). Zero tolerance.
   - `paraphrase_of_prior`: signature equal to an earlier row's signature, for
     more than MAX_PRIOR_PARAPHRASE_SHARE (2%) of rows. 2% is below the 3%
     bucket floor, so reusing any whole bucket's template fails, while a few
     chance collisions of short generic templates do not.
   A signature with fewer than MIN_TEMPLATE_WORDS words carries no template
   (e.g. "<num> + <num>" for a bare arithmetic expression): there the
   numbers ARE the problem, so only exact repeats count.

2. Eval overlap, against the rows the engine evaluates: the eval split, or,
   for an env without one, the first N train rows verifiers falls back to
   (N = the run's eval examples). Word 8-grams (lowercased, sentence punctuation dropped,
   numbers and operators kept), as in PaLM's contamination analysis: word
   n-grams ignore formatting noise that breaks char n-grams, and eight
   words in a row rarely coincide by chance. A generated row is flagged
   when >= 50% of its 8-grams occur in the eval split (PaLM used 70%; our
   rows are deliberate paraphrases, so we are stricter). Questions shorter
   than n words are compared whole. Eval questions are hashed (8-byte
   blake2b, ngram_hash.py) into a set as they stream in and never stored,
   or arrive already hashed as an EvalNgramIndex. The report holds counts
   only: no eval text, no generated question (it may contain eval text),
   and no row indices either, since a list of flagged rows tells whoever
   redraws them which questions are evaluated (decontam.py: the tool drops
   these rows itself after the generator runs, so this gate is a defensive
   second check that should never fire).

3. Eval containment (`eval_contained`): a row that embeds a whole eval
   question in a sentence ("Compute <eval question> and give the result.")
   shares few of its own n-grams with the eval split, so rule 2 misses it.
   Each eval question is also hashed whole, and every window of a row's
   tokens (same normalisation) of an eval question's length is looked up.
   To keep false positives low on short questions:
   - an embedded eval question of >= CONTAIN_ANY_CONTEXT_TOKENS (8) tokens is
     flagged whatever surrounds it (eight tokens in a row, as in rule 2);
   - a shorter one (>= CONTAIN_MIN_TOKENS = 3 tokens, e.g. a bare expression
     "47+38") only when the rest of the row adds no number and no operator,
     i.e. the row asks the same problem in a frame ("What is 47+38?"), not a
     bigger problem that has it as a part ("85-(47+38)");
   - a question of 1-2 tokens only when it is the whole row.

What is not covered: synonym rewrites ("Find" vs "Compute"), reordered
clauses, and translation. Signatures are heuristics, not semantics.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from .common import GateFailure, GateReport, share
from .ngram_hash import DROP, NGRAM_N, EvalNgramIndex, eval_ngram_index, overlap_tokens, question_hashes

MIN_TEMPLATE_WORDS = 4
MAX_PRIOR_PARAPHRASE_SHARE = 0.02
EVAL_MIN_OVERLAP = 0.5
CONTAIN_MIN_TOKENS = 3  # shorter eval questions are caught only as the whole row
CONTAIN_ANY_CONTEXT_TOKENS = NGRAM_N  # this long: flagged whatever the row adds around it
_OPERATORS = frozenset("+-*/×÷=^%<>")

NUM, NAME, PRON, STR = "<num>", "<name>", "<pron>", "<str>"
PLACEHOLDERS = (NUM, NAME, PRON, STR)

# Capitalised words that are grammar, not names: kept as words so that
# "How many ..." and "What is ..." stay different. Everything else that is
# capitalised (names, places, brands, variables "A", "X") becomes <name>.
_FUNCTION_WORDS = frozenset(
    """a an the and or but nor if then else when whenever while what which who whom whose where why how
    is are was were be been being am do does did has have had having it its this that these those there here
    of in on at to from by for with without into onto over under between among after before during since until
    per each every all any some no not none both either neither than as so such very more most less least
    many much few several can could will would shall should may might must let suppose assume given
    i we you our your my me us yes true false
    find compute calculate determine evaluate solve write show prove explain list name give return consider
    reverse sort count convert simplify translate identify classify choose select answer read use rewrite
    fix implement complete fill estimate round add subtract multiply divide expand factor order arrange
    match predict describe summarize summarise state check decide tell output print create generate""".split()
)
_NUMBER_WORDS = frozenset(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen
    seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million
    billion half halves third thirds quarter quarters dozen twice thrice double triple first second fourth fifth
    sixth seventh eighth ninth tenth once""".split()
)
# Swapping "Sally" for "Tom" drags "she" -> "he" along; both are part of the alias.
_PRONOUNS = frozenset("he she him her his hers himself herself they them their theirs themselves".split())
_DROP = DROP  # sentence punctuation, the same set the n-gram tokens drop

_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?(?:st|nd|rd|th)?")
# Short quoted literals (<= 3 words) are parameters like names; long quotes and
# code blocks are content and stay in the signature.
_QUOTED_RE = re.compile(r"\"([^\"\n]{1,60})\"|“([^”\n]{1,60})”|`([^`\n]{1,60})`")
_TOKEN_RE = re.compile(r"<(?:num|name|pron|str)>|[^\W\d_]+|\S")


def _quoted_to_placeholder(m: re.Match) -> str:
    inner = next(g for g in m.groups() if g is not None)
    return f" {STR} " if len(inner.split()) <= 3 else m.group(0)


def template_signature(text: str) -> str:
    """The question with names, numbers, pronouns, short literals and punctuation erased.

    "Sally has 5 apples." and "Sarah has 7 apples" -> "<name> has <num> apples".
    Runs of one placeholder collapse ("Sally Smith" and "Tom" are both <name>).
    """
    text = unicodedata.normalize("NFKC", str(text))
    text = _QUOTED_RE.sub(_quoted_to_placeholder, text)
    text = _NUMBER_RE.sub(f" {NUM} ", text)
    out: list[str] = []
    for tok in _TOKEN_RE.findall(text):
        low = tok.lower()
        if tok in PLACEHOLDERS:
            sig = tok
        elif tok in _DROP:
            continue
        elif low in _NUMBER_WORDS:
            sig = NUM
        elif low in _PRONOUNS:
            sig = PRON
        elif tok[0].isupper() and (low not in _FUNCTION_WORDS or (len(tok) == 1 and tok != "I")):
            sig = NAME  # a single capital letter is a variable ("Let A be"), never the article
        else:
            sig = low
        if sig in PLACEHOLDERS and out and out[-1] == sig:
            continue
        out.append(sig)
    return " ".join(out)


def _template_words(signature: str) -> int:
    return sum(1 for t in signature.split() if t not in PLACEHOLDERS and t[0].isalpha())


def _exact_key(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _question(row: Any) -> str | None:
    q = row.get("question") if isinstance(row, dict) else None
    return q if isinstance(q, str) and q.strip() else None


def _bucket(row: Any) -> str:
    info = row.get("info") if isinstance(row, dict) else None
    info = info if isinstance(info, dict) else {}
    return f"{info.get('domain')} / {info.get('sub_domain')}"


def check_near_duplicates(
    rows: list[dict],
    prior_rows_by_iter: dict[int, list[dict]],
    max_share: float = MAX_PRIOR_PARAPHRASE_SHARE,
    min_template_words: int = MIN_TEMPLATE_WORDS,
) -> GateReport:
    """Flag rows that repeat or alias a row of an earlier iteration; report per-bucket diversity."""
    prior_exact: dict[str, int] = {}
    prior_sig: dict[str, int] = {}
    for it in sorted(prior_rows_by_iter):
        for row in prior_rows_by_iter[it]:
            q = _question(row)
            if q is None:
                continue
            prior_exact.setdefault(_exact_key(q), it)
            sig = template_signature(q)
            if _template_words(sig) >= min_template_words:
                prior_sig.setdefault(sig, it)

    repeats: list[int] = []
    paraphrases: list[int] = []
    repeat_iters: Counter = Counter()
    paraphrase_iters: Counter = Counter()
    sigs_by_bucket: dict[str, list[str]] = defaultdict(list)
    uninformative = 0
    for i, row in enumerate(rows):
        q = _question(row)
        if q is None:
            continue  # the dataset gate's row_schema reports it
        sig = template_signature(q)
        sigs_by_bucket[_bucket(row)].append(sig)
        informative = _template_words(sig) >= min_template_words
        uninformative += not informative
        if _exact_key(q) in prior_exact:
            repeats.append(i)
            repeat_iters[prior_exact[_exact_key(q)]] += 1
        elif informative and sig in prior_sig:
            paraphrases.append(i)
            paraphrase_iters[prior_sig[sig]] += 1

    def by_iter(c: Counter) -> str:
        return ", ".join(f"iter_{k}: {v}" for k, v in sorted(c.items()))

    failures = []
    if repeats:
        failures.append(GateFailure(rule="repeat_of_prior", message=f"{len(repeats)} row(s) repeat an earlier iteration's question verbatim ({by_iter(repeat_iters)})", rows=repeats))
    T = len(rows)
    if paraphrases and share(len(paraphrases), T) > max_share:
        failures.append(GateFailure(
            rule="paraphrase_of_prior",
            message=f"{len(paraphrases)} row(s) = {share(len(paraphrases), T):.1%} alias an earlier iteration's row (same template, names/numbers swapped: {by_iter(paraphrase_iters)}); max {max_share:.0%}",
            rows=paraphrases,
        ))

    all_sigs = [s for ss in sigs_by_bucket.values() for s in ss]
    stats = {
        "prior_rows": sum(len(v) for v in prior_rows_by_iter.values()),
        "repeat_rows": len(repeats),
        "paraphrase_rows": paraphrases,
        "paraphrase_share": round(share(len(paraphrases), T), 4),
        "uninformative_signatures": uninformative,  # rows compared by exact repeat only
        "distinct_signatures": len(set(all_sigs)),
        "distinct_signature_share": round(share(len(set(all_sigs)), len(all_sigs)), 4),
        # Pillar 2: clones differing only in names/numbers count as one row.
        "per_bucket": {b: {"rows": len(ss), "distinct_signatures": len(set(ss))} for b, ss in sorted(sigs_by_bucket.items())},
    }
    return GateReport.build("near_duplicates", failures, stats)


# ---------------------------------------------------------------- eval overlap


@dataclass(frozen=True)
class EvalOverlap:
    """Which generated rows rules 2 and 3 flag: the ONE definition of "overlaps the evaluated questions".

    Row indices stay inside the tool (decontam.py drops these rows); reports carry the counts only.
    """

    overlapping: list[int]  # rule 2, `eval_overlap`: >= min_overlap of the row's n-grams are eval n-grams
    containing: list[int]  # rule 3, `eval_contained`: the row embeds a whole eval question
    rows_with_any_shared_ngram: int

    @property
    def rows(self) -> list[int]:
        """Every flagged row, in row order (a row is flagged by at most one of the two rules)."""
        return sorted(self.overlapping + self.containing)


def find_eval_overlap(rows: list[dict], index: EvalNgramIndex, min_overlap: float = EVAL_MIN_OVERLAP) -> EvalOverlap:
    """Rules 2 and 3 over the generated rows (index = position in `rows`), against a hashed eval index."""
    overlapping: list[int] = []
    containing: list[int] = []
    any_shared = 0
    for i, row in enumerate(rows):
        q = _question(row)
        if q is None:
            continue
        grams = question_hashes(q, index.n)
        hits = sum(1 for g in grams if g in index.hashes)
        any_shared += hits > 0
        if grams and hits / len(grams) >= min_overlap:
            overlapping.append(i)
        elif _embeds_eval_question(overlap_tokens(q), index):
            containing.append(i)
    return EvalOverlap(overlapping, containing, any_shared)


def check_eval_overlap(
    rows: list[dict],
    eval_questions: Iterable[str] | EvalNgramIndex,
    n: int = NGRAM_N,
    min_overlap: float = EVAL_MIN_OVERLAP,
    max_flagged_share: float = 0.0,
) -> GateReport:
    """Fail when generated rows overlap the evaluated questions; counts only, never which rows.

    `eval_questions` is either the eval questions (an iterable consumed once,
    each text dropped after hashing) or, better, an `EvalNgramIndex` built
    where the eval rows are read so that no eval text enters this process at
    all (see ngram_hash.py); the index's own n is used then. The gate fails
    when the flagged share exceeds `max_flagged_share` (default: any flagged
    row). In `iterate` the generate step has already dropped every row
    `find_eval_overlap` flags (decontam.py), so this is a defensive check:
    it fires only if the eval index changed after that drop.
    """
    index = eval_questions if isinstance(eval_questions, EvalNgramIndex) else eval_ngram_index(eval_questions, n)
    del eval_questions  # nothing below can see eval text: only integer hashes survive
    n = index.n
    found = find_eval_overlap(rows, index, min_overlap)

    # Without an eval split the engine evaluates the first train rows: those were indexed instead.
    against = ("eval questions" if index.source == "eval_split" else
               f"the {index.n_questions} train rows the engine evaluates (the env has no eval split)")
    # No `rows=`: which rows were flagged is exactly what a teacher must not learn (module docstring, rule 2).
    redo = ("the generate step drops such rows, so this check should find none: delete generate.json and "
            "re-run iterate to redo the drop; eval text and row numbers are never shown")
    failures = []
    if found.overlapping and share(len(found.overlapping), len(rows)) > max_flagged_share:
        failures.append(GateFailure(
            rule="eval_overlap",
            message=f"{len(found.overlapping)} generated row(s) share >= {min_overlap:.0%} of their word {n}-grams with {against} ({redo})",
        ))
    if found.containing and share(len(found.containing), len(rows)) > max_flagged_share:
        failures.append(GateFailure(
            rule="eval_contained",
            message=f"{len(found.containing)} generated row(s) contain a whole eval question inside their text ({redo})",
        ))
    stats = {
        "indexed": against,
        "n": n,
        "min_overlap": min_overlap,
        "eval_questions": index.n_questions,
        "eval_ngrams": len(index.hashes),
        "rows_with_any_shared_ngram": found.rows_with_any_shared_ngram,
        "flagged_rows": len(found.overlapping),
        "contained_rows": len(found.containing),
    }
    return GateReport.build("eval_overlap", failures, stats)


def _embeds_eval_question(tokens: list[str], index: EvalNgramIndex) -> bool:
    """Does the row contain a whole eval question, by the containment rules in the module docstring?"""
    for start, length in index.contained_spans(tokens):
        if length == len(tokens) or length >= CONTAIN_ANY_CONTEXT_TOKENS:
            return True
        if length < CONTAIN_MIN_TOKENS:
            continue
        rest = tokens[:start] + tokens[start + length:]
        if not any(any(c.isdigit() for c in t) or t in _OPERATORS for t in rest):
            return True  # only a frame around the eval question: the same problem
    return False
