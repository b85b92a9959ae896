"""The docs site and the README, checked like code.

- The pages made from the code (the CLI reference from the Typer app, the run-dir files from the
  pydantic models) are what docs/gen_reference.py generates now: a changed flag or field fails
  here until the page is regenerated.
- `mkdocs build --strict` passes: no broken link or anchor, no page left out of the nav.
- The hand-written reference pages name every exit code, environment variable and teacher key
  the code has; the README stays short and undated, and its links lead to files that exist.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def _gen_reference():
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", ["reference/cli.md", "reference/run-files.md"])
def test_generated_reference_page_matches_the_code(page):
    gen = _gen_reference()
    committed = (DOCS / page).read_text(encoding="utf-8")
    assert committed == gen.PAGES[page](), (
        f"docs/{page} differs from what the code generates; regenerate it: {gen.REGENERATE}")


def test_the_cli_reference_covers_every_command_and_option():
    """Not just equal to the generator's output: the generator must see every command and flag."""
    import click
    import typer

    from selfimprove.cli import app

    text = (DOCS / "reference/cli.md").read_text(encoding="utf-8")

    def walk(cmd: click.Command, prefix: str):
        yield prefix, cmd
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, f"{prefix} {name}")

    for path, cmd in walk(typer.main.get_command(app), "selfimprove"):
        assert f"`{path}`" in text, f"docs/reference/cli.md lacks the command {path}"
        for param in cmd.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--"):
                    assert f"`{opt}" in text, f"docs/reference/cli.md lacks {path} {opt}"


def test_the_run_files_reference_covers_every_field():
    gen = _gen_reference()
    text = (DOCS / "reference/run-files.md").read_text(encoding="utf-8")
    for _path, model, _writer in gen._models():
        for name in model.model_fields:
            assert f"**`{name}`**" in text, f"docs/reference/run-files.md lacks {model.__name__}.{name}"


def test_the_generator_check_names_a_stale_page(tmp_path, monkeypatch):
    gen = _gen_reference()
    for page in gen.PAGES:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text(gen.PAGES[page](), encoding="utf-8")
    monkeypatch.setattr(gen, "DOCS", tmp_path)
    assert gen.stale_pages() == []
    (tmp_path / "reference/cli.md").write_text("# edited by hand\n", encoding="utf-8")
    assert gen.stale_pages() == ["reference/cli.md"]


def test_mkdocs_build_is_strict_and_clean(tmp_path):
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    if mkdocs is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
    warnings = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith(("WARNING", "ERROR"))]
    assert proc.returncode == 0 and not warnings, "mkdocs build --strict failed:\n" + "\n".join(
        warnings or (proc.stdout + proc.stderr).splitlines()[-20:])
    # the agent's documents are shown from the repository's own files, not copies
    for name in ("SKILL.md", "SKILL-reference.md"):
        link = DOCS / "agent" / name
        assert link.is_symlink() and link.resolve() == (REPO / name).resolve(), f"docs/agent/{name}"
        assert (tmp_path / "site" / "agent" / Path(name).stem / "index.html").is_file()


def test_exit_codes_page_names_every_exit_code():
    from selfimprove import errors

    codes = {0} | {cls.exit_code for cls in vars(errors).values()
                   if isinstance(cls, type) and issubclass(cls, errors.SelfImproveError)}
    text = (DOCS / "reference/exit-codes.md").read_text(encoding="utf-8")
    rows = {int(m) for m in re.findall(r"^\| (\d+) \|", text, flags=re.M)}
    assert codes <= rows, f"docs/reference/exit-codes.md lacks exit codes {sorted(codes - rows)}"


def test_config_page_names_every_environment_variable_and_teacher_key():
    from selfimprove.phases.overrides import TEACHER_KEYS

    text = (DOCS / "reference/config.md").read_text(encoding="utf-8")
    used = {m for f in (REPO / "src").rglob("*.py")
            for m in re.findall(r"\bSELFIMPROVE_[A-Z0-9_]*[A-Z0-9]\b", f.read_text(encoding="utf-8"))}
    assert used, "no SELFIMPROVE_* variable found in src/: the scan is broken"
    missing = sorted(v for v in used if f"`{v}`" not in text)
    assert not missing, f"docs/reference/config.md lacks the environment variables {missing}"
    missing = sorted(k for k in TEACHER_KEYS if f"`{k}`" not in text)
    assert not missing, f"docs/reference/config.md lacks the overrides.toml keys {missing}"


def test_every_results_section_says_how_to_reproduce_it():
    text = (DOCS / "results.md").read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    assert len(sections) >= 10
    for section in sections:
        title = section.splitlines()[0]
        assert "Reproduce" in section, f"docs/results.md section '{title}' gives no command to reproduce it"


def test_readme_is_short_undated_and_links_to_files_that_exist():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 220, f"README.md has {len(lines)} lines; move detail into docs/"
    dated = [ln for ln in lines if re.search(r"\b20\d\d-\d\d-\d\d\b", ln)]
    assert not dated, f"README.md holds dated lines (they belong in docs/results.md): {dated[:3]}"
    start, end = text.find("<!-- demo-table:start -->"), text.find("<!-- demo-table:end -->")
    assert 0 <= start < end, "README.md lacks the demo-table markers"
    assert "docs/img/report-top.png" in text and "docs/img/report-1280.png" in text  # the report page, pictured
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" not in target:
            assert (REPO / target).exists(), f"README.md links to {target}, which does not exist"
    for page in ("how-to/slurm.md", "how-to/llm-teacher.md", "how-to/your-env.md", "how-to/coding-agent.md"):
        assert f"docs/{page}" in text, f"README.md does not link docs/{page}"
