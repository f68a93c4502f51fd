"""Trust, round three: one rule for what a pin may read (class 5).

A pin reads a collaboration only while it is a current member of it; the
person at their own terminal with no session identity owns the state root
and reads everything.  Every front end asks ``service.readers``: the real
CLI as a subprocess (a pin from ``--self`` or from the host's own variable)
and the real MCP server through the SDK's stdio client.  A refusal is exit
9 and one line that is the same whether the message or collaboration exists
elsewhere or nowhere.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_helpers import clean_env, run, run_json

ALICE, BOB, CAROL, NEW = "claude-code:a11ce-0001", "codex:b0b-0002", "codex:ca201-0003", "claude-code:a11ce-0009"
NIL_MSG = "00000000-0000-4000-8000-000000000000"
NIL_COLLAB = "00000000-0000-4000-8000-0000000000ff"
SECRET_WORD = "zanzibarquokka"  # only in collaboration B: nothing of B may reach a reader of A
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def ok(root: Path, pin: str | None, *args: str) -> dict[str, Any]:
    code, doc, err = run_json(*args, *(("--self", pin) if pin else ()), root=root)
    assert code == 0, (args, err)
    result: dict[str, Any] = doc["result"]
    return result


def send(root: Path, pin: str, cid: str, to: str, subject: str) -> str:
    out = ok(root, pin, "send", "--collab", cid, "--to", to, "--subject", subject, "--body", f"{subject} body")
    return str(out["results"][0]["id"])


def masked(line: str) -> str:
    """A refusal line with its ids blanked: two refusals must then be the same line."""
    return UUID.sub("<id>", line)


@pytest.fixture
def world(tmp_path: Path) -> dict[str, str]:
    """A: alice and bob (a message from alice to bob); B: carol alone (a note and a message to herself)."""
    root = tmp_path / "state"
    a = ok(root, ALICE, "open", "--alias", "alice", "--label", "a", "--task", "collab A")["collab"]
    ok(root, BOB, "join", "--collab", a, "--alias", "bob")
    b = ok(root, CAROL, "open", "--alias", "carol", "--label", "b", "--task", "collab B")["collab"]
    ok(root, CAROL, "log", "append", "--collab", b, "--text", f"note {SECRET_WORD}")
    ok(root, ALICE, "join", "--collab", b, "--alias", "alice2")  # someone carol can send to
    in_b = send(root, CAROL, b, "alice2", f"plan {SECRET_WORD}")
    ok(root, ALICE, "leave", "--collab", b)
    in_a = send(root, ALICE, a, "bob", "review the lock")
    return {"root": str(root), "a": a, "b": b, "in_a": in_a, "in_b": in_b}


def refused(root: Path, args: tuple[str, ...], env: dict[str, str | None] | None = None) -> str:
    code, out, err = run(*args, root=root, env=env)
    assert code == 9, (args, code, out, err)
    assert out == "" and SECRET_WORD not in err and "plan" not in err, (args, out, err)
    return err


# ---- the CLI ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["--self", "host variable"])
def test_cli_pin_of_a_cannot_read_a_message_of_b(world: dict[str, str], how: str) -> None:
    root, b, in_b = Path(world["root"]), world["b"], world["in_b"]
    as_bob: tuple[str, ...] = ("--self", BOB) if how == "--self" else ()
    env = {"CODEX_THREAD_ID": BOB.split(":", 1)[1]} if how == "host variable" else None
    by_id = refused(root, ("show", in_b, *as_bob), env)
    nowhere = refused(root, ("show", NIL_MSG, *as_bob), env)
    assert masked(by_id) == masked(nowhere)  # whether the id exists elsewhere is not revealed
    named = refused(root, ("show", in_b, "--collab", b, *as_bob), env)
    unknown = refused(root, ("show", in_b, "--collab", NIL_COLLAB, *as_bob), env)
    assert masked(named) == masked(unknown)
    for args in (("log", "show", "--collab", b), ("registry", "--collab", b), ("status", "--collab", b),
                 ("log", "render", "--collab", b), ("search", "plan", "--collab", b), ("inbox", "--collab", b)):
        refused(root, (*args, *as_bob), env)
    code, doc, err = run_json("search", SECRET_WORD, *as_bob, root=root, env=env)
    assert code == 0 and doc["result"]["count"] == 0, (doc, err)
    code, doc, err = run_json("status", *as_bob, root=root, env=env)
    assert code == 0 and world["b"] not in str(doc), doc


def test_cli_displaced_pin_reads_nothing_more(world: dict[str, str]) -> None:
    root, a, in_a = Path(world["root"]), world["a"], world["in_a"]
    assert ok(root, ALICE, "show", in_a)["message"]["id"] == in_a  # a member reads its collaboration
    ok(root, NEW, "join", "--collab", a, "--alias", "alice", "--succeeds", ALICE, "--reason", "crashed")
    for args in (("show", in_a), ("show", in_a, "--collab", a), ("inbox", "--collab", a),
                 ("log", "show", "--collab", a), ("registry", "--collab", a), ("status", "--collab", a),
                 ("log", "render", "--collab", a), ("search", "lock", "--collab", a),
                 ("watch", "--collab", a, "--timeout", "1s")):
        refused(root, (*args, "--self", ALICE))
    code, doc, err = run_json("search", "lock", "--self", ALICE, root=root)
    assert code == 0 and doc["result"]["count"] == 0, (doc, err)
    assert ok(root, NEW, "show", in_a)["message"]["id"] == in_a  # the successor reads it


def test_cli_watch_across_a_takeover_shows_the_successor_s_mail_to_nobody_else(world: dict[str, str]) -> None:
    """The rule holds when the messages are read: a watch begun as a member ends refused once displaced."""
    import subprocess
    import time

    root, a = Path(world["root"]), world["a"]
    watcher = subprocess.Popen([sys.executable, "-m", "agentmsg.cli", "watch", "--collab", a, "--self", ALICE,
                                "--timeout", "60s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=clean_env(root))
    try:
        time.sleep(3)  # the watch has started waiting as alice's current holder
        ok(root, NEW, "join", "--collab", a, "--alias", "alice", "--succeeds", ALICE, "--reason", "crashed")
        ok(root, BOB, "send", "--collab", a, "--to", "alice", "--kind", "request", "--subject",
           f"for the successor {SECRET_WORD}", "--body", "b")
        out, err = watcher.communicate(timeout=60)
    finally:
        watcher.kill()
    assert watcher.returncode == 9, (out, err)
    assert SECRET_WORD.encode() not in out + err, (out, err)


def test_cli_left_participant_reads_nothing_more(world: dict[str, str]) -> None:
    root, a, in_a = Path(world["root"]), world["a"], world["in_a"]
    ok(root, BOB, "leave", "--collab", a)
    for args in (("show", in_a), ("inbox", "--collab", a), ("log", "show", "--collab", a),
                 ("status", "--collab", a), ("search", "lock", "--collab", a)):
        refused(root, (*args, "--self", BOB))
    refused(root, ("show", in_a), {"CODEX_THREAD_ID": BOB.split(":", 1)[1]})


def test_cli_two_inherited_host_variables_are_not_the_owner(world: dict[str, str]) -> None:
    env = {"CODEX_THREAD_ID": "b0b-0002", "CLAUDE_CODE_SESSION_ID": "someone-else"}
    refused(Path(world["root"]), ("show", world["in_b"]), env)
    refused(Path(world["root"]), ("search", SECRET_WORD), env)


def test_cli_owner_without_identity_reads_everything(world: dict[str, str], tmp_path: Path) -> None:
    root, a, b = Path(world["root"]), world["a"], world["b"]
    for mid in (world["in_a"], world["in_b"]):
        assert ok(root, None, "show", mid)["message"]["id"] == mid
    assert ok(root, None, "search", SECRET_WORD)["count"] == 2  # the message and the note of B
    assert ok(root, None, "search", "lock")["count"] == 1
    for cid in (a, b):
        ok(root, None, "log", "show", "--collab", cid)
        ok(root, None, "registry", "--collab", cid)
        assert ok(root, None, "status", "--collab", cid)["collab"] == cid
        ok(root, None, "log", "render", "--html", "--collab", cid, "--out", str(tmp_path / f"{cid}.html"))
    assert set(ok(root, None, "status")["collabs"]) == {a, b}
    code, out, err = run("top", "--once", root=root)
    assert code == 0 and "carol" in out and "bob" in out, (out, err)


def test_cli_top_of_a_session_shows_its_own_collaborations(world: dict[str, str]) -> None:
    code, out, err = run("top", "--once", root=Path(world["root"]), env={"CODEX_THREAD_ID": BOB.split(":", 1)[1]})
    assert code == 0 and "bob" in out and "carol" not in out, (out, err)


# ---- the MCP server ------------------------------------------------------------------------------------------


def serve(root: Path, pin: str, body: Callable[[Any], Awaitable[None]]) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "agentmsg.cli", "mcp", "--self", pin],
                                   env=clean_env(root))

    async def main() -> None:
        with anyio.fail_after(120):
            async with Client(params) as client:
                await body(client)

    anyio.run(main)


def tool_text(result: Any) -> str:
    return "".join(c.text for c in result.content)


def assert_refused(result: Any) -> str:
    text = tool_text(result)
    assert result.is_error, text
    assert result.structured_content["error"]["code"] == 9, result.structured_content
    assert SECRET_WORD not in text and "plan" not in text and "lock" not in text, text
    return text


async def transcript_refused(client: Any, cid: str) -> str:
    try:
        got = await client.read_resource(f"agentmsg://collab/{cid}/transcript")
    except Exception as exc:  # the SDK raises its MCPError for a resource error
        text = str(exc)
        assert "exit code 9" in text and SECRET_WORD not in text and "lock" not in text, text
        return text
    raise AssertionError(f"transcript of {cid} was served: {got.contents[0].text[:200]!r}")


def test_mcp_pin_of_a_cannot_read_b(world: dict[str, str]) -> None:
    root, b, in_b = Path(world["root"]), world["b"], world["in_b"]
    seen: dict[str, str] = {}

    async def body(client: Any) -> None:
        seen["by_id"] = assert_refused(await client.call_tool("show", {"message_id": in_b}))
        seen["nowhere"] = assert_refused(await client.call_tool("show", {"message_id": NIL_MSG}))
        seen["named"] = assert_refused(await client.call_tool("show", {"message_id": in_b, "collab": b}))
        seen["unknown"] = assert_refused(await client.call_tool("show", {"message_id": in_b,
                                                                         "collab": NIL_COLLAB}))
        assert_refused(await client.call_tool("status", {"collab": b}))
        assert_refused(await client.call_tool("inbox", {"collab": b}))
        seen["t_b"] = await transcript_refused(client, b)
        seen["t_nil"] = await transcript_refused(client, NIL_COLLAB)
        mine = await client.call_tool("show", {"message_id": world["in_a"]})
        assert not mine.is_error and "lock" in tool_text(mine)

    serve(root, BOB, body)
    assert masked(seen["by_id"]) == masked(seen["nowhere"])
    assert masked(seen["named"]) == masked(seen["unknown"])
    assert masked(seen["t_b"]) == masked(seen["t_nil"])


def test_mcp_displaced_pin_loses_the_transcript_and_the_messages(world: dict[str, str]) -> None:
    root, a, in_a = Path(world["root"]), world["a"], world["in_a"]
    ok(root, BOB, "send", "--collab", a, "--to", "alice", "--subject", "lock question", "--body", "lock?")

    async def body(client: Any) -> None:
        first = await client.read_resource(f"agentmsg://collab/{a}/transcript")
        assert "lock" in first.contents[0].text  # a current member reads it
        ok(root, NEW, "join", "--collab", a, "--alias", "alice", "--succeeds", ALICE, "--reason", "crashed")
        await transcript_refused(client, a)
        assert_refused(await client.call_tool("show", {"message_id": in_a}))
        assert_refused(await client.call_tool("show", {"message_id": in_a, "collab": a}))
        assert_refused(await client.call_tool("inbox", {"collab": a}))
        assert_refused(await client.call_tool("status", {"collab": a}))
        assert_refused(await client.call_tool("wait_for_reply", {"message_id": in_a, "collab": a,
                                                                  "timeout_seconds": 1}))
        listed = await client.read_resource("agentmsg://collabs")
        assert a not in listed.contents[0].text

    serve(root, ALICE, body)


def test_mcp_left_participant_loses_the_transcript(world: dict[str, str]) -> None:
    root, a, in_a = Path(world["root"]), world["a"], world["in_a"]
    ok(root, BOB, "leave", "--collab", a)

    async def body(client: Any) -> None:
        await transcript_refused(client, a)
        assert_refused(await client.call_tool("show", {"message_id": in_a}))
        assert_refused(await client.call_tool("inbox", {"collab": a}))

    serve(root, BOB, body)
