"""docs/SECRETS.md and agentmsg.text.secrets agree: every kind is documented and tested, and vice versa."""

from __future__ import annotations

import re
from pathlib import Path

from agentmsg.text.secrets import RULES, is_placeholder, scan
from tests.text.test_secrets import CASES

DOC = Path(__file__).resolve().parents[2] / "docs" / "SECRETS.md"


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n### {title}\n")
    end = text.find("\n### ", start + 1)
    return text[start:end]


def _documented_kinds() -> list[str]:
    return re.findall(r"^\| `([a-z0-9-]+)` \|", _section("Rules"), re.MULTILINE)


def test_the_kinds_table_lists_every_kind_once() -> None:
    documented = _documented_kinds()
    assert len(documented) == len(set(documented)), "a kind has two rows"
    assert set(documented) == {rule.kind for rule in RULES}


def test_the_kinds_table_is_in_precedence_order() -> None:
    in_rules: list[str] = []
    for rule in RULES:
        if rule.kind not in in_rules:
            in_rules.append(rule.kind)
    assert _documented_kinds() == in_rules


def test_every_documented_kind_has_a_positive_case_and_vice_versa() -> None:
    assert set(_documented_kinds()) == {case[0] for case in CASES}


def test_placeholder_examples_in_the_doc_are_placeholders() -> None:
    section = _section("Placeholders")
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| form")]
    cells = [row.split(" | ")[1] for row in rows]
    # `x` or `` `x` `` (a code span holding backticks)
    examples = [a or b for cell in cells for a, b in re.findall(r"`` (.+?) ``|`([^`]+)`", cell)]
    # "ghp_xxxx…" in the doc means more of the same character
    examples = [re.sub(r"(.)…", lambda m: m.group(1) * 40, ex) for ex in examples]
    assert "`pass show db`" in examples
    assert len(examples) > 40
    assert [ex for ex in examples if not is_placeholder(ex)] == []


def test_doc_claims_hold() -> None:
    uuid = "550e8400-e29b-41d4-a716-446655440000"
    assert [f.kind for f in scan(f"token = {uuid}")] == ["assignment"]  # "`token = <uuid>`) is flagged"
    assert scan(uuid) == []  # a bare UUID is not
    word = "super" + "secret"
    assert scan(f"pass{'word'}: {word}") == []  # a documented limit
    assert [f.kind for f in scan(f"DB_PASS{'WORD'}={word}")] == ["assignment"]
    assert [f.kind for f in scan(f'"pass{"word"}": "{word}1"')] == ["assignment"]
