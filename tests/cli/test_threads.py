"""Threads through the real CLI (issue 31): every message belongs to one, the root of its reply/correlation chain
or an explicit ``send --thread NAME``; ``inbox --thread``, ``log show --thread`` and ``search --thread`` keep one
thread's messages; a reply cannot leave its parent's thread."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_helpers import JsonResult, run, run_json, snapshot

ORCH = "codex:0199-thread-orch"
SPEC = "claude-code:5418-thread-spec"


class Pair:
    def __init__(self, base: Path) -> None:
        self.root, self.home = base / "state", base / "home"
        self.home.mkdir()
        code, doc, err = self.json("open", "--self", ORCH, "--alias", "orch", "--label", "threads", "--task", "t")
        assert code == 0, err
        self.collab = doc["result"]["collab"]
        code, _doc, err = self.json("join", "--collab", self.collab, "--self", SPEC, "--alias", "spec")
        assert code == 0, err

    def json(self, *args: str) -> JsonResult:
        return run_json(*args, root=self.root, env={"HOME": str(self.home)})

    def send(self, who: str, *args: str) -> str:
        code, doc, err = self.json("send", "--collab", self.collab, "--self", who, *args)
        assert code == 0, err
        return str(doc["result"]["results"][0]["id"])


@pytest.fixture
def pair(tmp_path: Path) -> Pair:
    return Pair(tmp_path)


def test_threads_by_reply_chain_and_by_name_filter_inbox_log_and_search(pair: Pair) -> None:
    p = pair
    first = p.send(ORCH, "--to", "spec", "--kind", "request", "--subject", "parser tabs", "--body", "tabs break it")
    named = p.send(ORCH, "--to", "spec", "--thread", "release-1.2", "--subject", "release", "--body", "tabs in notes")
    reply = p.send(SPEC, "--reply-to", first, "--body", "tabs fixed")
    again = p.send(ORCH, "--reply-to", reply, "--body", "tabs confirmed")
    joined = p.send(ORCH, "--to", "spec", "--thread", "release-1.2", "--body", "tabs changelog")
    alone = p.send(ORCH, "--to", "spec", "--body", "tabs elsewhere")
    # every message carries its thread: the chain's root, or the name
    code, doc, err = p.json("inbox", "--collab", p.collab, "--self", SPEC, "--history")
    assert code == 0, err
    threads = {m["id"]: m["thread"] for m in doc["result"]["messages"]}
    assert threads == {first: first, named: "release-1.2", again: first, joined: "release-1.2", alone: alone}
    code, doc, err = p.json("show", reply, "--collab", p.collab, "--self", ORCH)
    assert code == 0 and doc["result"]["message"]["thread"] == first, err
    # inbox --thread: by the root's id, by any message's id, by name
    for value, want in ((first, [first, again]), (again, [first, again]), ("release-1.2", [named, joined])):
        code, doc, err = p.json("inbox", "--collab", p.collab, "--self", SPEC, "--thread", value)
        assert code == 0, err
        assert [m["id"] for m in doc["result"]["messages"]] == want, value
        assert (doc["result"]["count"], doc["result"]["thread"]) == (len(want), first if value == again else value)
    code, doc, err = p.json("inbox", "--collab", p.collab, "--self", ORCH, "--thread", first)
    assert code == 0 and [m["id"] for m in doc["result"]["messages"]] == [reply], err
    # log show --thread: the thread's messages, both directions, in order
    code, doc, err = p.json("log", "show", "--collab", p.collab, "--self", ORCH, "--thread", reply)
    assert code == 0, err
    assert [(e["id"], e["author"]) for e in doc["result"]["entries"]] == [(first, "orch"), (reply, "spec"),
                                                                          (again, "orch")]
    code, out, err = run("log", "show", "--collab", p.collab, "--self", ORCH, "--thread", "release-1.2",
                         root=p.root, env={"HOME": str(p.home)})
    assert code == 0, err
    assert out.startswith("thread release-1.2: 2 message(s)\n") and "orch→spec" in out and "tabs changelog" in out
    # search --thread: only the thread's hits, in one collaboration or all
    code, doc, err = p.json("search", "tabs", "--collab", p.collab, "--self", ORCH)
    assert code == 0 and doc["result"]["count"] == 6, err
    for extra in (["--collab", p.collab], []):
        code, doc, err = p.json("search", "tabs", "--self", ORCH, "--thread", first, *extra)
        assert code == 0, err
        assert sorted(h["id"] for h in doc["result"]["hits"]) == sorted([first, reply, again])
        assert doc["result"]["filters"]["thread"] == first
    code, doc, err = p.json("search", "tabs", "--self", ORCH, "--thread", "no-such-thread")
    assert code == 0 and doc["result"]["hits"] == [], err


def test_a_reply_stays_in_its_parents_thread_and_bad_names_are_refused(pair: Pair) -> None:
    p = pair
    first = p.send(ORCH, "--to", "spec", "--thread", "alpha", "--body", "x")
    before = snapshot(p.root)
    for args, line in (
        (["--reply-to", first, "--thread", "beta"], "usage: a reply is in the thread of the message it answers "
                                                    "(alpha), not 'beta'"),
        (["--to", "spec", "--thread", "two\nlines"], "usage: invalid thread 'two\\nlines'"),
        (["--to", "spec", "--thread", "x" * 129], "usage: invalid thread"),
        (["--to", "spec", "--thread", "  "], "usage: invalid thread"),
    ):
        code, doc, err = p.json("send", "--collab", p.collab, "--self", SPEC, "--body", "y", *args)
        assert (code, err.count("\n"), err[:len(line)]) == (2, 1, line), (args, err)
    assert snapshot(p.root) == before
    # the same name again on the reply is its thread: accepted
    reply = p.send(SPEC, "--reply-to", first, "--thread", "alpha", "--body", "y")
    code, doc, err = p.json("inbox", "--collab", p.collab, "--self", ORCH, "--thread", "alpha")
    assert code == 0 and [m["id"] for m in doc["result"]["messages"]] == [reply], err
    code, _doc, err = p.json("inbox", "--collab", p.collab, "--self", ORCH, "--thread", "")
    assert code == 2 and err.startswith("usage: invalid thread"), err
