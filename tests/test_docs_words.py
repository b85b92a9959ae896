"""One word, one meaning (issue 43, item 7).

"seed" means a training seed (`--seeds 3`, seed ids) and, as an identifier, the `seed` dialect
(prime-rl at the seed commit). The user's written procedure this tool implements is "the skill's
procedure", never "the seed": the phrasings below read only that way, so none may come back in
what a user reads. They are chosen not to match the dialect ("the seed dialect's tree",
"prime-rl at the seed commit", "--stack seed") nor a training seed ("each seed's accuracy").
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROCEDURE_AS_SEED = [
    r"the seed's procedure",
    r"the seed says",
    r"beyond the seed\b",
    r"per the seed\b",
    r"the seed's rules?\b",
    r"the seed's (nine|five|validation|feature|iter_N|pinned)",
    r"the seed's (\"|Phase|step|Pillar|floor|bars?\b|defaults?\b)",
    r"\bseed (Phase|Non-negotiable|verdict)\b",
    r"Pillar \d of the seed",
    r"as the seed (does|says|asks)",
    r"the project's seed\b",
]


def _pages() -> list[Path]:
    return [REPO / "README.md", REPO / "SKILL.md", REPO / "SKILL-reference.md",
            REPO / "examples" / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def test_the_written_procedure_is_never_called_the_seed() -> None:
    pattern = re.compile("|".join(f"(?:{p})" for p in PROCEDURE_AS_SEED), re.IGNORECASE)
    hits = []
    for page in _pages():
        text = " ".join(page.read_text(encoding="utf-8").split())  # phrases wrap across lines
        hits += [f"{page.relative_to(REPO)}: ...{text[max(0, m.start() - 40):m.end() + 20]}..."
                 for m in pattern.finditer(text)]
    assert not hits, "write 'the skill's procedure' for the user's written procedure:\n" + "\n".join(hits)


def test_the_patterns_catch_the_old_phrasing_and_spare_the_other_meanings() -> None:
    pattern = re.compile("|".join(f"(?:{p})" for p in PROCEDURE_AS_SEED), re.IGNORECASE)
    for old in ["the seed's nine lines", "as the seed's \"Phase 3 cap\"", "beyond the seed",
                "per the seed", "the seed says 3-4 words", "the seed's rule", "-> seed verdict: flat"]:
        assert pattern.search(old), old
    for kept in ["the seed dialect's tree", "prime-rl at the seed commit", "--stack seed",
                 "each seed's accuracy", "that arm's best seed's checkpoint", "seed-aware tests",
                 "the seed dialect: `--ckpt.resume-step N`", "the whole seed-dialect run"]:
        assert not pattern.search(kept), kept
