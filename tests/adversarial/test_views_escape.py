"""Trust, round three, class 6: no human-facing view passes a hidden character through.

Bidi controls (U+202A-202E, U+2066-2069, U+200E/F, U+061C), C0 and C1
controls and ANSI escape sequences reorder or repaint what a person reads.
Every field a record carries (label, task, subject, body, note, and the ones
only a forged record can fill: alias, pin, runtime, kind, priority,
``reply_to``, broadcast, flags, notify adapter) goes through every view, the
real CLI's stdout and stderr, the Markdown transcripts and the HTML page,
and comes out with those characters escaped by the one function
(``text/escape``).  The ordinary fields are stored through the CLI; the
forged ones through the file store's own append, as a same-user process or
a member writing rows directly could.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmsg import records
from agentmsg.backends.file.store import FileStore as FilePort
from agentmsg.cli.output import yaml_text
from agentmsg.domain import rules
from agentmsg.text import escape as visible
from tests.support.cli_helpers import REPO_ROOT, run, run_json
from tests.support.pins import DRIVER_PIN, REVIEWER_PIN

BIDI = "".join(map(chr, [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]))
HOSTILE = BIDI + "\x1b[31m\x1b]0;title\x07\x9b2J\x85\x7f\u2028"  # through the CLI (no NUL in an argument)
FORGED = HOSTILE + "\x00\x1b[2J"  # in forged records
SHOWN = visible.escape(FORGED)  # what every view prints instead (FORGED holds no line break or tab)


def hidden(text: str) -> set[str]:
    """The characters of ``text`` the one escape would not print as they are (a tab and ``\\n`` are fine)."""
    return {c for c in text if visible.escape(c) != c}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, str]:
    root = tmp_path_factory.mktemp("views") / "state"
    cid = run_json("open", "--alias", "driver", "--label", "lab" + BIDI + "\x1b[31m", "--task", "task" + HOSTILE,
                   "--self", DRIVER_PIN, root=root).doc["result"]["collab"]
    assert run_json("join", "--alias", "reviewer", "--collab", cid, "--self", REVIEWER_PIN, root=root).code == 0
    sent = run_json("send", "--to", "reviewer", "--kind", "request", "--subject", "subj" + BIDI + "\x1b[31m",
                    "--body", "body" + HOSTILE, "--collab", cid, "--self", DRIVER_PIN, root=root)
    assert sent.code == 0, sent
    first = sent.doc["result"]["results"][0]["id"]
    assert run_json("log", "append", "--text", "note" + HOSTILE, "--collab", cid, "--self", DRIVER_PIN,
                    root=root).code == 0
    rec = {"type": "message", "id": records.uuid4(), "collab": cid, "sender": "driver" + FORGED,
           "sender_pin": "codex:x" + FORGED, "sender_runtime": "codex" + FORGED, "to": "reviewer",
           "kind": "request" + FORGED, "priority": "high" + FORGED, "subject": "forged" + FORGED,
           "body": "forged body" + FORGED, "reply_to": f"reviewer/{first}" + FORGED,
           "broadcast": "bc" + FORGED, "flags": ["flag" + FORGED]}
    rec["digest"] = rules.digest(rec)
    with FilePort(root).transaction(cid) as tx:
        tx.append_event({"type": "joined", "alias": "mallory" + FORGED, "pin": "codex:m" + FORGED,
                         "runtime": "codex" + FORGED, "notify": {"adapter": "hook" + FORGED}})
        forged = tx.append_message(rec).id
    return root, cid, first, forged


VIEWS = {
    "status": ("status", "--collab", "{cid}"),
    "registry": ("registry", "--collab", "{cid}"),
    "log show": ("log", "show", "--collab", "{cid}"),
    "top": ("top", "--once", "--collab", "{cid}"),
    "show": ("show", "{forged}", "--collab", "{cid}"),
    "show first": ("show", "{first}", "--collab", "{cid}"),
    "inbox": ("inbox", "--all", "--collab", "{cid}", "--self", REVIEWER_PIN),
    "search": ("search", "forged"),
}


@pytest.mark.parametrize("view", list(VIEWS))
def test_every_terminal_view_escapes_every_field(world: tuple[Path, str, str, str], view: str) -> None:
    root, cid, first, forged = world
    args = [a.format(cid=cid, first=first, forged=forged) for a in VIEWS[view]]
    code, out, err = run(*args, root=root, env={"COLUMNS": "1000"})
    assert code == 0, err
    assert not hidden(out) and not hidden(err), (view, hidden(out) | hidden(err))
    if view in ("registry", "show", "inbox", "search", "top"):
        assert "\\u202e" in out  # shown, not dropped


def test_verify_reports_the_forged_participant_escaped(world: tuple[Path, str, str, str]) -> None:
    root, _cid, _first, _forged = world
    code, out, err = run("verify", root=root)
    assert code == 13 and not hidden(out) and not hidden(err)
    assert "the registry names a participant mallory\\u202a\\u202b" in out


def test_the_registry_yaml_reads_back_exactly_and_shows_bidi_escaped(world: tuple[Path, str, str, str]) -> None:
    root, cid, _first, _forged = world
    code, out, _err = run("registry", "--collab", cid, root=root)
    assert code == 0 and not hidden(out)
    doc = yaml.safe_load(out)
    assert doc["label"] == "lab" + BIDI + "\x1b[31m" and doc["task"] == "task" + HOSTILE
    assert doc["participants"]["mallory" + FORGED]["notify"] == {"adapter": "hook" + FORGED}
    assert 'label: "lab\\u202a\\u202b\\u202c\\u202d\\u202e\\u2066' in out


def test_transcripts_and_the_html_page_escape_every_field(world: tuple[Path, str, str, str], tmp_path: Path) -> None:
    root, cid, _first, forged = world
    page = tmp_path / "page.html"
    assert run_json("log", "render", "--html", "--collab", cid, "--out", str(page), root=root).code == 0
    assert run_json("log", "render", "--collab", cid, root=root).code == 0
    base = root / "collabs" / cid
    views = [page, base / "collaboration.md", *sorted((base / "transcripts").glob("*.md"))]
    assert len(views) == 4
    for path in views:
        text = path.read_text(encoding="utf-8")
        assert not hidden(text), (path.name, hidden(text))
    md = (base / "collaboration.md").read_text(encoding="utf-8")
    assert f"## [driver{SHOWN}→reviewer]" in md  # a forged sender: escaped on its own line
    assert f"- from: driver{SHOWN} (codex{SHOWN}) · kind: request{SHOWN} · priority: high{SHOWN}" in md
    assert forged in page.read_text(encoding="utf-8")


def test_an_error_line_escapes_what_it_quotes(tmp_path: Path) -> None:
    code, out, err = run("send", "--to", "x" + HOSTILE, "--subject", "s", "--body", "b", "--self", DRIVER_PIN,
                         "--collab", "aaaaaaaa-1111-4111-8111-111111111111", root=tmp_path / "state")
    assert code != 0 and not hidden(out) and not hidden(err)


def test_yaml_text_round_trips_every_hidden_character() -> None:
    doc = {"label": FORGED + "\ufeff\ufffe\uffff\ud800 \\ \" '日本", "plain": "日本 ok", "many": "a\nb"}
    out = yaml_text(doc)
    assert yaml.safe_load(out) == doc and not hidden(out)
    assert "plain: 日本 ok" in out  # text without a hidden character is printed as it is


# ---- the one function: no view prints around it ---------------------------------------------------------


def _calls(path: Path) -> list[tuple[str, int, str]]:
    """``(callee, line, first argument's source)`` for every call in a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            arg = ast.unparse(node.args[0]) if node.args else ""
            out.append((name, node.lineno, arg))
    return out


def test_the_cli_prints_a_human_view_only_through_the_one_escape() -> None:
    output = REPO_ROOT / "agentmsg" / "cli" / "output.py"
    raw = [(n, ln, a) for n, ln, a in _calls(output)
           if n in ("print", "sys.stdout.write", "sys.stderr.write") and not a.startswith("envelope(")
           and not a.startswith("visible.")]
    assert raw == [], raw  # say()/write() escape every line; JSON envelopes are for machines
    app = (REPO_ROOT / "agentmsg" / "cli" / "app.py").read_text(encoding="utf-8")
    assert not re.search(r"\bprint\(|sys\.stdout\.write\(", app)


def test_top_draws_every_line_through_the_one_escape() -> None:
    top = REPO_ROOT / "agentmsg" / "cli" / "top.py"
    texts = [(ln, a) for n, ln, a in _calls(top) if n == "Text"]
    allowed = {"line(text)", "''", "'█'", "escape(m.body).replace('\\t', '    ')"}
    assert [t for t in texts if t[1] not in allowed] == []


# ---- properties of the one function ---------------------------------------------------------------------

NASTY = st.text(alphabet=st.sampled_from([*BIDI, *map(chr, range(0x20)), *map(chr, range(0x7F, 0xA0)), "\u2028",
                                          "\ufeff", "\U000e0041", "a", "é", "日", "\\", '"', "'", " "]))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), NASTY))
def test_line_hides_nothing_keeps_one_line_and_is_idempotent(text: str) -> None:
    shown = visible.line(text)
    assert not hidden(shown) and "\n" not in shown and "\t" not in shown
    assert visible.line(shown) == shown and visible.escape(shown) == shown


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), NASTY))
def test_registry_yaml_round_trips_and_hides_nothing(text: str) -> None:
    out = yaml_text({"label": text, text[:8] or "k": [text]})
    assert not hidden(out)
    assert yaml.safe_load(out) == {"label": text, text[:8] or "k": [text]}


PRINTABLE_ASCII = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x7F))


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), NASTY, PRINTABLE_ASCII))
def test_the_shortcut_for_printable_ascii_changes_nothing(text: str) -> None:
    """``escape`` and the boundary's ``one_line`` return printable ASCII as it is, building no table (the
    pre-tool hook's refusal quotes a path and a reason): every text comes out as the tables would make it."""
    from agentmsg.text import boundary

    assert visible.escape(text) == visible.escaped(text)
    assert boundary.escape(text) == visible.escaped(text, boundary._tables()[0])
    assert boundary.one_line(text) == visible.escaped(text.translate(boundary._tables()[1]), boundary._tables()[0])


def test_a_table_never_escapes_printable_ascii() -> None:
    with pytest.raises(ValueError):
        visible.table(ord("x"))
