"""Hashed word n-grams of questions, for the eval-overlap gate. STANDARD LIBRARY ONLY.

Eval rows are sealed, so eval questions should be hashed where they are read
(e.g. in the environment probe, a fresh interpreter that may lack selfimprove)
and only integers should cross into the tool. This file has no selfimprove
imports, so such a process can load it by path:

    spec = importlib.util.spec_from_file_location("ngram_hash", path_of_this_file)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    reply = mod.eval_ngram_index(q for q in eval_questions).to_json()

and the tool rebuilds it with `EvalNgramIndex.from_json(reply)`.

Tokens: NFKC, casefold, words (\\w+) and single symbols, sentence punctuation
dropped (numbers and operators kept: "3+4" and "3*4" are different
questions). A text with fewer than n tokens is hashed whole, tagged, so short
questions (bare expressions) are compared by exact match. Hash: the first 8
bytes of blake2b over the tokens joined by U+001F, as a big-endian int.
Changing any of this changes every hash: bump HASH_VERSION.

Containment: every eval question is also hashed whole (tag "<span>"), keyed by
its token count, so a generated row that embeds an eval question in a sentence
("Compute <eval question> and give the result.") is found by hashing the row's
token windows of those lengths (`contained_spans`). Still only integers.
"""

# No `from __future__ import annotations`: with string annotations a dataclass
# looks its module up in sys.modules, which fails when loaded by path unregistered.
import hashlib
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable

HASH_VERSION = 2  # 2: whole-question span hashes for containment
NGRAM_N = 8
DROP = frozenset(".,;:!?'\"“”‘’`")
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def overlap_tokens(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", str(text)).casefold()
    return [t for t in _TOKEN_RE.findall(text) if t not in DROP]


def _hash(parts: Iterable[str]) -> int:
    return int.from_bytes(hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=8).digest(), "big")


def span_hash(tokens: list[str]) -> int:
    """The hash of one whole question (or one window of a row) for containment."""
    return _hash(["<span>", *tokens])


def question_hashes(text: str, n: int = NGRAM_N) -> list[int]:
    """Hashes of the text's word n-grams, or one hash of the whole text when it is shorter than n."""
    tokens = overlap_tokens(text)
    if len(tokens) < n:
        return [_hash(["<whole>", *tokens])] if tokens else []
    return [_hash(tokens[k : k + n]) for k in range(len(tokens) - n + 1)]


@dataclass(frozen=True)
class EvalNgramIndex:
    """The eval split reduced to a set of n-gram hashes: no text, nothing to leak."""

    n: int
    n_questions: int
    hashes: frozenset
    spans: Any = None  # {token count: frozenset of whole-question span hashes}; None = empty
    version: int = HASH_VERSION
    # which rows were indexed: "eval_split", or "train_fallback" (the env has no eval
    # split, so the engine evaluates its first train rows and those were indexed)
    source: str = "eval_split"

    def to_json(self) -> dict[str, Any]:
        spans = {str(k): sorted(v) for k, v in sorted((self.spans or {}).items())}
        return {"version": self.version, "n": self.n, "n_questions": self.n_questions, "hashes": sorted(self.hashes),
                "spans": spans, "source": self.source}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "EvalNgramIndex":
        if data.get("version") != HASH_VERSION:
            raise ValueError(f"eval n-gram index version {data.get('version')} != {HASH_VERSION}; rebuild it")
        spans = {int(k): frozenset(int(h) for h in v) for k, v in (data.get("spans") or {}).items()}
        return cls(n=int(data["n"]), n_questions=int(data["n_questions"]), hashes=frozenset(int(h) for h in data["hashes"]),
                   spans=spans, source=str(data.get("source") or "eval_split"))

    def contained_spans(self, tokens: list[str]) -> list[tuple[int, int]]:
        """(start, length) of every window of `tokens` that equals a whole eval question."""
        found = []
        for length, hashes in (self.spans or {}).items():
            for k in range(len(tokens) - length + 1):
                if span_hash(tokens[k : k + length]) in hashes:
                    found.append((k, length))
        return found


def eval_ngram_index(questions: Iterable[str], n: int = NGRAM_N) -> EvalNgramIndex:
    """Consume the questions once, keeping only hashes (each text is dropped after hashing)."""
    hashes: set[int] = set()
    spans: dict[int, set[int]] = {}
    count = 0
    for q in questions:
        count += 1
        hashes.update(question_hashes(q, n))
        tokens = overlap_tokens(q)
        if tokens:
            spans.setdefault(len(tokens), set()).add(span_hash(tokens))
    return EvalNgramIndex(n=n, n_questions=count, hashes=frozenset(hashes),
                          spans={k: frozenset(v) for k, v in spans.items()})
