"""Trust, round three, class 4: a doorbell target taken from the session's own environment.

``TMUX``/``TMUX_PANE`` are a claim any process can make.  A pane is recorded
(``join``/``open --notify tmux``, ``wake on``, the SessionStart facts) only
when the recording process, or the host process its hooks recorded, runs in
it on a server socket of this user's; before typing, the pane must still hold
the recorded process.  Everything runs for real: private tmux servers
(``-S socket -f /dev/null``), the CLI and the hooks as subprocesses, some of
them started inside a pane by a stand-in host process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_helpers import clean_env, run_json
from tests.support.helpers_hooks import hook_command, host_env, payload

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

PEER = "codex:peer"
SESSION = "me-1"
ME = f"claude-code:{SESSION}"
NO_TMUX: dict[str, str | None] = {"TMUX": None, "TMUX_PANE": None}

#: A stand-in host: runs its steps (the CLI, a hook) as its children inside the pane, then shows a prompt and
#: appends every line typed there to a file.  Named like a host so the hooks find it as the host process.
HOST = r"""
import json, os, subprocess, sys
spec = json.load(open(sys.argv[1]))
with open("/proc/self/comm", "w") as fh:
    fh.write("fakehost")
results = []
for step in spec["steps"]:
    env = dict(step["env"])
    env.update(TMUX=os.environ.get("TMUX", ""), TMUX_PANE=os.environ.get("TMUX_PANE", ""))  # as tmux set them
    env.update(step.get("forge") or {})
    done = subprocess.run(step["argv"], env=env, input=step.get("stdin", "").encode(), capture_output=True)
    results.append({"rc": done.returncode, "out": done.stdout.decode(), "err": done.stderr.decode()})
with open(spec["results"] + ".tmp", "w") as fh:
    json.dump(results, fh)
os.rename(spec["results"] + ".tmp", spec["results"])
sys.stdout.write("\u276f "); sys.stdout.flush()
for line in sys.stdin:
    with open(spec["typed"], "a") as fh:
        fh.write(line)
    sys.stdout.write("got it\n\u276f "); sys.stdout.flush()
"""


class Server:
    """A private tmux server; every pane runs :data:`HOST` with its own steps."""

    def __init__(self, tmp: Path, name: str) -> None:
        self.tmp, self.name = tmp, name
        self.sock = tmp / f"{name}.sock"
        self.panes = 0

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", str(self.sock), *args], capture_output=True, text=True,
                              check=True).stdout

    def pane(self, steps: list[dict[str, Any]] | None = None) -> Pane:
        """A new pane (``%0`` first) running the stand-in host; waits until its steps ran."""
        pane = Pane(self, f"%{self.panes}", self.tmp / f"{self.name}-{self.panes}")
        self.panes += 1
        spec = {"steps": steps or [], "results": str(pane.base) + ".results", "typed": str(pane.typed)}
        Path(str(pane.base) + ".json").write_text(json.dumps(spec))
        argv = [sys.executable, "-c", HOST, str(pane.base) + ".json"]
        env = clean_env(None, NO_TMUX)
        if pane.id == "%0":
            subprocess.run(["tmux", "-S", str(self.sock), "-f", "/dev/null", "new-session", "-d", "-x", "160", "-y",
                            "20", *argv], check=True, env=env)
        else:
            self.tmux("new-window", "-d", *argv)
        pane.wait()
        return pane

    def kill(self) -> None:
        subprocess.run(["tmux", "-S", str(self.sock), "kill-server"], check=False, capture_output=True)


class Pane:
    def __init__(self, server: Server, pane_id: str, base: Path) -> None:
        self.server, self.id, self.base = server, pane_id, base
        self.typed = Path(str(base) + ".typed")
        self.results: list[dict[str, Any]] = []

    def wait(self) -> None:
        done = Path(str(self.base) + ".results")
        deadline = time.time() + 60
        while not done.exists():
            assert time.time() < deadline, f"pane {self.id} never finished its steps"
            time.sleep(0.1)
        self.results = json.loads(done.read_text())

    def pid(self) -> int:
        return int(self.server.tmux("display-message", "-p", "-t", self.id, "#{pane_pid}"))

    def env(self) -> dict[str, str]:
        """What tmux puts in the environment of a process in this pane."""
        return {"TMUX": f"{self.server.sock},{os.getpid()},0", "TMUX_PANE": self.id}

    def screen(self) -> str:
        return self.server.tmux("capture-pane", "-p", "-t", self.id)

    def untouched(self) -> bool:
        """Nothing was typed here: no line reached the prompt and no doorbell shows."""
        time.sleep(0.5)
        return not self.typed.exists() and "agentmsg" not in self.screen()


@pytest.fixture
def servers(tmp_path: Path) -> Any:
    made: list[Server] = []

    def make(name: str) -> Server:
        made.append(Server(tmp_path, name))
        return made[-1]

    yield make
    for server in made:
        server.kill()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "root"


@pytest.fixture
def cid(root: Path) -> str:
    code, doc, err = run_json("open", "--self", PEER, "--alias", "driver", "--label", "l", "--task", "t", root=root,
                              env=NO_TMUX)
    assert code == 0, err
    return str(doc["result"]["collab"])


def cli_step(root: Path, *args: str, forge: dict[str, str] | None = None) -> dict[str, Any]:
    """The real CLI, run by the host in its pane."""
    return {"argv": [sys.executable, "-m", "agentmsg.cli", *args, "--json"], "env": clean_env(root, NO_TMUX),
            "forge": forge}


def hook_step(tmp: Path, root: Path, forge: dict[str, str] | None = None) -> dict[str, Any]:
    """Claude Code's SessionStart hook, as the host starts it."""
    env = host_env("claude", tmp, root, SESSION, "SessionStart")
    return {"argv": ["/bin/sh", "-c", hook_command("claude", "SessionStart")], "env": env,
            "stdin": json.dumps(payload("SessionStart", SESSION)), "forge": forge}


def join(cid: str, *more: str) -> list[str]:
    return ["join", "--collab", cid, "--self", ME, "--alias", "bob", *more]


def participants(root: Path, cid: str) -> dict[str, Any]:
    code, doc, err = run_json("registry", "--collab", cid, root=root, env=NO_TMUX)
    assert code == 0, err
    return dict(doc["result"]["participants"])


def send(root: Path, cid: str) -> tuple[int, dict[str, Any]]:
    code, doc, _err = run_json("send", "--collab", cid, "--self", PEER, "--to", "bob", "--subject", "s", "--body",
                               "BODY-NEVER-TYPED", root=root, env=NO_TMUX)
    return code, doc["result"]["results"][0]


def facts_file(root: Path) -> dict[str, Any]:
    from agentmsg.backends.file import layout

    doc = json.loads(Path(layout.session_file(str(root), ME, layout.SESSION_FACTS)).read_text())
    return dict(doc["facts"])


# ---- record time: a claim the recording process does not run in is refused --------------------------------


@pytest.mark.parametrize("command", ["join", "open"])
def test_a_process_outside_the_pane_cannot_name_it(servers: Any, root: Path, cid: str, command: str) -> None:
    victim = servers("a").pane()
    args = join(cid, "--notify", "tmux") if command == "join" else \
        ["open", "--self", ME, "--alias", "bob", "--label", "l", "--task", "t", "--notify", "tmux"]
    code, doc, err = run_json(*args, root=root, env=victim.env())
    assert code == 9, err
    assert err.startswith(f"identity: --notify tmux: pane {victim.id} is not this session's own (pane "
                          f"{victim.id} does not run this session")
    assert doc["error"]["type"] == "IdentityError"
    assert "bob" not in participants(root, cid)


def test_a_sibling_pane_cannot_name_the_pane_next_to_it(servers: Any, root: Path, cid: str, tmp_path: Path) -> None:
    """Same server, same user: a session in pane %1 names %0 for its hooks, ``join`` and ``wake on``."""
    a = servers("a")
    victim = a.pane()
    forge = victim.env()
    sibling = a.pane([hook_step(tmp_path, root, forge), cli_step(root, *join(cid, "--notify", "tmux"), forge=forge),
                      cli_step(root, *join(cid)), cli_step(root, "wake", "on", "--collab", cid, "--self", ME,
                                                           forge=forge)])
    hook, joined, plain, wake_on = sibling.results
    facts = facts_file(root)
    assert hook["rc"] == 0 and facts["pid"] == sibling.pid()  # the hooks ran in the sibling's host process ...
    assert "pane" not in facts and "tmux_socket" not in facts  # ... and recorded no pane for it
    assert joined["rc"] == 9 and joined["err"].startswith("identity: --notify tmux: pane %0 is not this session's "
                                                          "own (pane %0 does not run this session")
    assert plain["rc"] == 0 and wake_on["rc"] == 9
    assert wake_on["err"].startswith("identity: wake on: the tmux pane is not this session's own (pane %0 does "
                                     "not run this session")
    assert send(root, cid)[0] == 0
    assert victim.untouched() and sibling.untouched()


@pytest.mark.parametrize("forgery", ["another-server", "symlinked-socket"])
def test_a_forged_tmux_claim_inside_a_pane_is_refused(servers: Any, root: Path, cid: str, tmp_path: Path,
                                                      forgery: str) -> None:
    """The session runs in a pane of server A, but its environment names B's pane, or A's pane by a symlink."""
    other = servers("b").pane()
    link = tmp_path / "link.sock"
    if forgery == "another-server":
        forge = other.env()
    else:
        forge = {"TMUX": f"{link},1,0", "TMUX_PANE": "%0"}
    a = servers("a")
    link.symlink_to(a.sock)
    mine = a.pane([hook_step(tmp_path, root, forge), cli_step(root, *join(cid, "--notify", "tmux"), forge=forge),
                   cli_step(root, *join(cid)), cli_step(root, "wake", "on", "--collab", cid, "--self", ME,
                                                              forge=forge)])
    hook, joined, plain, wake_on = mine.results
    assert hook["rc"] == 0 and "pane" not in facts_file(root)
    why = "the socket path is a symlink" if forgery == "symlinked-socket" else "does not run this session"
    assert joined["rc"] == 9 and joined["err"].startswith("identity: --notify tmux: pane %0 is not this session's")
    assert why in joined["err"] and len(joined["err"].splitlines()) == 1
    assert plain["rc"] == 0 and participants(root, cid)["bob"]["notify"] == {"adapter": "hook"}
    assert wake_on["rc"] == 9 and why in wake_on["err"]
    assert send(root, cid)[0] == 0
    assert other.untouched() and mine.untouched()


# ---- ring time: a target edited after it was recorded types nothing ----------------------------------------


def _set_notify(root: Path, cid: str, adapter: dict[str, Any]) -> None:
    from agentmsg.backends.file.store import FileStore
    from agentmsg.domain.validate import pin
    from agentmsg.service.messaging import Mailbox

    Mailbox(FileStore(root)).set_notify(cid, pin(ME), adapter)


@pytest.mark.parametrize("target", ["another-pane", "another-server"])
def test_a_notify_target_edited_after_joining_types_nothing(servers: Any, root: Path, cid: str,
                                                            target: str) -> None:
    a = servers("a")
    mine = a.pane([cli_step(root, *join(cid, "--notify", "tmux"))])
    assert mine.results[0]["rc"] == 0, mine.results[0]["err"]
    recorded = participants(root, cid)["bob"]["notify"]
    victim = a.pane() if target == "another-pane" else servers("b").pane()
    _set_notify(root, cid, {**recorded, "pane": victim.id, "socket": str(victim.server.sock)})
    code, result = send(root, cid)
    assert victim.untouched() and mine.untouched()
    assert code == 7
    assert result["state"].startswith(f"stored, not yet surfaced (notify failed: not rung (tmux pane {victim.id} "
                                      "not verified: pane")
    assert recorded == {"adapter": "tmux", "pane": "%0", "socket": str(a.sock), "pid": mine.pid(),
                        "pid_start": recorded["pid_start"]}  # the pane's process, as it was when recorded
    _set_notify(root, cid, {k: v for k, v in recorded.items() if k not in ("pid", "pid_start")})  # an old entry
    code, result = send(root, cid)
    assert code == 7 and "recorded without its process" in result["state"]
    assert mine.untouched()


@pytest.mark.parametrize("target", ["another-pane", "another-server"])
def test_wake_facts_edited_after_wake_on_type_nothing(servers: Any, root: Path, cid: str, tmp_path: Path,
                                                      target: str) -> None:
    from agentmsg.backends.file.store import FileStore

    a = servers("a")
    assert run_json(*join(cid), root=root, env=NO_TMUX).code == 0
    mine = a.pane([hook_step(tmp_path, root), cli_step(root, "wake", "on", "--collab", cid, "--self", ME)])
    assert [r["rc"] for r in mine.results] == [0, 0], mine.results
    on = json.loads(mine.results[1]["out"])["result"]
    assert on["facts"]["pane"] == "%0" and on["facts"]["tmux_socket"] == str(a.sock)
    victim = a.pane() if target == "another-pane" else servers("b").pane()
    with FileStore(root).transaction(cid) as tx:  # the consent record, edited on disk after recording
        (consent,) = [r for r in tx.delivery_records() if r["type"] == "wake-on"]
        forged = {k: v for k, v in consent.items() if k not in ("ts", "sum", "seq")}
        forged.update(consent=str(uuid.uuid4()), facts={**consent["facts"], "pane": victim.id,
                                                        "tmux_socket": str(victim.server.sock)})
        tx.append_delivery(forged)
    code, result = send(root, cid)
    assert victim.untouched() and mine.untouched()
    assert code == 0
    assert result["wake"]["outcome"].startswith(f"not rung (tmux pane {victim.id} not verified: pane "), result


# ---- the session's own pane still works --------------------------------------------------------------------


def test_a_join_from_inside_the_pane_rings_it(servers: Any, root: Path, cid: str) -> None:
    mine = servers("a").pane([cli_step(root, *join(cid, "--notify", "tmux"))])
    assert mine.results[0]["rc"] == 0, mine.results[0]["err"]
    code, result = send(root, cid)
    assert code == 0 and result["detail"] == "tmux: rang pane %0"
    deadline = time.time() + 10
    while not mine.typed.exists() and time.time() < deadline:
        time.sleep(0.1)
    assert mine.typed.read_text().startswith(f"agentmsg: new update {result['id']} for bob from driver")
    assert "BODY-NEVER-TYPED" not in mine.screen()


def test_wake_on_from_inside_the_pane_rings_it(servers: Any, root: Path, cid: str, tmp_path: Path) -> None:
    assert run_json(*join(cid), root=root, env=NO_TMUX).code == 0
    mine = servers("a").pane([hook_step(tmp_path, root)])
    assert mine.results[0]["rc"] == 0 and facts_file(root)["pane"] == "%0"
    code, _doc, err = run_json("wake", "on", "--collab", cid, "--self", ME, root=root, env=NO_TMUX)  # outside:
    assert code == 0, err  # the pane holds the host process the hooks recorded
    code, result = send(root, cid)
    assert code == 0 and result["wake"] == {"outcome": "rang", "mechanism": "tmux"}
    deadline = time.time() + 10
    while not mine.typed.exists() and time.time() < deadline:
        time.sleep(0.1)
    assert mine.typed.read_text().startswith("agentmsg: 1 new message for bob")

