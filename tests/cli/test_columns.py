"""``status``, ``inbox`` and ``registry`` on a terminal of 80 and of 40 columns.

The CLI runs with its stdout on a pseudo-terminal (so it takes the TTY
path) and ``COLUMNS`` set; every alias, pin and message id must appear
whole on one line of what it printed, and a pipe keeps the plain text.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.support.cli_helpers import clean_env, run
from tests.support.cli_helpers import on_tty as tty_run
from tests.support.facade import Draft, FileStore

PINS = {"driver": "codex:0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
        "reviewer": "claude-code:5418c0de-1111-4222-8333-944455556666",
        "carol": "human:carol"}
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_tty(root: Path, columns: int, *args: str, env: dict[str, str] | None = None) -> str:
    e = clean_env(root, {"COLUMNS": str(columns), "LINES": "200", "TERM": "xterm", "NO_COLOR": "1", **(env or {})})
    code, out, err = tty_run([sys.executable, "-m", "agentmsg.cli", *args], e)
    assert code == 0, err
    return ANSI.sub("", out.replace("\r\n", "\n"))


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, str, list[str]]:
    from agentmsg.domain import validate

    store = FileStore(tmp_path / "state")
    pins = {a: validate.pin(p) for a, p in PINS.items()}
    c = store.open(pins["driver"], "driver", "narrow", "terminals of every width").collab
    store.join(c, pins["reviewer"], "reviewer")
    store.join(c, pins["carol"], "carol")
    ids = [store.send(c, pins["carol"], Draft(to="driver", kind="request", subject=f"subject number {i} " * 3,
                                              body="b"))[0].message.id for i in range(2)]
    return store.root, c, ids


def _whole_on_a_line(out: str, values: list[str]) -> None:
    lines = out.splitlines()
    for v in values:
        assert any(v in line for line in lines), f"{v!r} is cut in:\n{out}"


@pytest.mark.parametrize("columns", [80, 40])
def test_status_keeps_alias_pin_and_state(world: tuple[Path, str, list[str]], columns: int) -> None:
    root, c, _ids = world
    out = on_tty(root, columns, "status", "--collab", c)
    _whole_on_a_line(out, [*PINS, *PINS.values()])
    table = out[out.index("participants"):]
    assert "…" not in table
    if columns == 40:
        assert "- alias: reviewer" in out and "  pin: human:carol" in out
        assert "  pending: 2" in out and "  active: yes" in out
    else:
        lines = [line.strip() for line in out.splitlines()]
        header = lines[lines.index("participants (enqueued/presented/replied count pending mail)") + 1]
        assert header.split() == ["alias", "pin", "active", "pending"]
        assert "(hidden at 80 columns: enqueued, presented, replied, notify, acked, requests)" in out
        assert [line for line in table.splitlines() if len(line) > 80] == []


@pytest.mark.parametrize("columns", [80, 40])
def test_inbox_keeps_sender_and_ids(world: tuple[Path, str, list[str]], columns: int) -> None:
    root, c, ids = world
    out = on_tty(root, columns, "inbox", "--collab", c, "--self", PINS["driver"])
    _whole_on_a_line(out, [*ids, "carol (human)"])
    head = out[:out.index("unacknowledged message(s)")]
    assert "…" not in head
    if columns == 80:
        assert all(len(line) <= 80 for line in head.splitlines())
    else:
        assert "- seq: 1" in head and f"  id: {ids[0]}" in head


@pytest.mark.parametrize("columns", [80, 40])
def test_registry_keeps_every_alias_and_pin(world: tuple[Path, str, list[str]], columns: int) -> None:
    root, c, _ids = world
    out = on_tty(root, columns, "registry", "--collab", c)
    _whole_on_a_line(out, [*(f"{a}:" for a in PINS), *PINS.values()])


def test_pipes_keep_plain_text(world: tuple[Path, str, list[str]]) -> None:
    root, c, _ids = world
    code, out, _ = run("status", "--collab", c, root=root, env={"COLUMNS": "40"})
    assert code == 0
    assert "alias\tpin\tactive\tnotify\tpending\trequests\tenqueued\tpresented\treplied\tacked" in out
    assert f"reviewer\t{PINS['reviewer']}\tyes\thook\t0" in out
