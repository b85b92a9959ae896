"""Where every bench script keeps its figures: bench/out/<name> (git-ignored)."""

from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"


def save(name: str, text: str) -> Path:
    """Write `text` (newline-terminated) to bench/out/<name>; returns the path."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    path.write_text(text if text.endswith("\n") else text + "\n")
    return path
