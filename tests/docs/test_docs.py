"""The docs stay true to the code: the CLI reference (docs/CLI.md) and README's exit-code table."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from agentmsg.errors import EXIT_CODES

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
CLI_DOC = REPO_ROOT / "docs" / "CLI.md"
SCRIPT = REPO_ROOT / "scripts" / "gen_cli_docs.py"
FIX = "python scripts/gen_cli_docs.py --write docs/CLI.md"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cli_docs", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    return _load_script()


@pytest.fixture(scope="module")
def generated(gen: ModuleType) -> str:
    return gen.generate()


def _readme() -> str:
    assert README.is_file(), f"README.md is missing; write it, then run `{FIX}`"
    return README.read_text(encoding="utf-8")


def test_cli_reference_is_current(gen: ModuleType, generated: str) -> None:
    assert CLI_DOC.is_file(), f"docs/CLI.md is missing; run `{FIX}`"
    text = CLI_DOC.read_text(encoding="utf-8")
    try:
        current = gen.current_section(text)
    except ValueError as exc:
        pytest.fail(f"docs/CLI.md has no CLI reference section ({exc}); add the lines "
                    f"`{gen.START}` and `{gen.END}` and run `{FIX}`")
    if current != generated:
        import difflib

        diff = "\n".join(difflib.unified_diff(current.splitlines(), generated.splitlines(), "docs/CLI.md",
                                              "generated", lineterm="", n=1))
        pytest.fail(f"docs/CLI.md's CLI reference is stale; run `{FIX}`\n{diff[:4000]}")


def test_readme_is_short_and_links_the_reference(gen: ModuleType) -> None:
    """Issue 30: the README is an overview (under 400 lines); the generated reference lives in docs/CLI.md."""
    text = _readme()
    assert len(text.splitlines()) < 400, len(text.splitlines())
    assert "](docs/CLI.md)" in text
    assert gen.START not in text and gen.END not in text


def test_reference_covers_every_command(gen: ModuleType, generated: str) -> None:
    paths = gen.command_paths()
    assert () in paths and ("log",) in paths
    for leaf in (("open",), ("send",), ("log", "append"), ("log", "render"), ("log", "show")):
        assert leaf in paths
    for path in paths:
        name = " ".join(("agentmsg", *path))
        assert f"### `{name}`\n" in generated
        assert f"Usage: {name} [OPTIONS]" in generated
    assert generated.count("### `agentmsg") == len(paths)


def test_generator_write_and_check(gen: ModuleType, generated: str, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "README.md"
    doc.write_text("# title\n\nbefore\n\n<!-- cli-reference:start -->\nold\n<!-- cli-reference:end -->\n\nafter\n")
    done = subprocess.run([sys.executable, str(SCRIPT), "--write", str(doc)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert doc.read_text() == f"# title\n\nbefore\n\n{generated}\n\nafter\n"

    monkeypatch.setattr(gen, "generate", lambda: generated)
    assert gen.main(["--check", str(doc)]) == 0
    doc.write_text(doc.read_text().replace("Usage: agentmsg send", "Usage: agentmsg sned"))
    assert gen.main(["--check", str(doc)]) == 1
    assert FIX in capsys.readouterr().err
    doc.write_text("# no markers\n")
    assert gen.main(["--write", str(doc)]) == 1
    assert "marker" in capsys.readouterr().err
    assert doc.read_text() == "# no markers\n"


def _exit_code_rows(text: str) -> dict[int, str]:
    match = re.search(r"^## Exit codes\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, "README.md has no '## Exit codes' section; add the table of agentmsg.errors.EXIT_CODES"
    return {int(code): meaning.strip() for code, meaning in
            re.findall(r"^\|\s*(\d+)\s*\|\s*(.*?)\s*\|\s*$", match.group(1), re.M)}


def test_readme_documents_every_exit_code() -> None:
    rows = _exit_code_rows(_readme())
    missing = [(code, meaning) for code, meaning in EXIT_CODES if code not in rows]
    assert not missing, ("README.md's '## Exit codes' table lacks: "
                         + "; ".join(f"| {code} | {meaning} |" for code, meaning in missing)
                         + " -- add these rows (codes come from agentmsg.errors.EXIT_CODES)")
    unknown = sorted(set(rows) - {code for code, _ in EXIT_CODES})
    assert not unknown, f"README.md documents exit codes that agentmsg.errors.EXIT_CODES lacks: {unknown}"
