"""The thin client (agentmsg/cli/thin.py) and the resident helper's ``cli`` duty (agentmsg/cli/serve.py).

Two roots are built by the same commands: one's commands run in-process (``AGENTMSG_NO_HELPER=1``), the
other's through its helper, by the client alone (exit 250 when it did not forward, so a command that quietly
ran in-process fails the test).  Every command the typer application has is run both ways; stdout, stderr,
exit codes and the records must agree apart from ids, timestamps, checksums and the root's own path.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentmsg.backends.file import layout
from agentmsg.cli import app, serve, thin
from agentmsg.errors import OutcomeUnknown
from agentmsg.runtime import doorbell
from tests.support.cli_helpers import REPO_ROOT, clean_env, on_tty

pytestmark = pytest.mark.xdist_group("thin")

NOT_FORWARDED = 250
#: The client alone: forward, or say it did not (sys.argv[0] as ``python -m agentmsg.cli`` has it).
CLIENT = ("import sys\nfrom agentmsg import PACKAGE_DIR\nfrom agentmsg.cli import thin\n"
          "code = thin.forward(sys.argv[1:], argv0=PACKAGE_DIR + '/cli/__main__.py')\n"
          f"thin.finish({NOT_FORWARDED} if code is None else code)\n")
MSG = "11111111-2222-4333-8444-555555555555"
MSG2 = "11111111-2222-4333-8444-666666666666"
ALICE, BOB, CAROL = "human:alice", "human:bob", "human:carol"


def env_for(root: Path, home: Path, *, helper: bool, **extra: str | None) -> dict[str, str]:
    env: dict[str, str | None] = {"HOME": str(home), "AGENTMSG_AHEAD_IDLE": "20", "COLUMNS": "100",
                                  "AGENTMSG_NO_HELPER": None if helper else "1", **extra}
    return clean_env(root, env)


def cli(args: list[str], env: dict[str, str], *, client: bool = False, stdin: bytes = b"",
        cwd: Path | None = None) -> tuple[int, str, str]:
    python = [sys.executable, "-S"] if "-S" in env.get("THIN_TEST_FLAGS", "") else [sys.executable]
    argv = [*python, "-c", CLIENT] if client else [*python, "-m", "agentmsg.cli"]
    where = cwd or Path(env["AGENTMSG_HOME"]).parent  # not this checkout: ``-c`` puts the folder on sys.path
    done = subprocess.run([*argv, *args], input=stdin, capture_output=True, env=env, timeout=120, cwd=where)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def start_helper(root: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    python = [sys.executable, "-S"] if "-S" in env.get("THIN_TEST_FLAGS", "") else [sys.executable]
    proc = subprocess.Popen([*python, "-m", "agentmsg.cli.serve", str(root)], env=env, cwd=root.parent,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    until(lambda: serving(root) == proc.pid)
    return proc


def serving(root: Path) -> int | None:
    """The pid of the helper that serves the command line at ``root`` (its socket is bound), or None."""
    if doorbell.CLI not in (doorbell.duties(str(root)) or ()):
        return None
    if not (root / layout.IDLE / layout.HELPER_SOCK).exists():
        return None
    raw = (root / layout.IDLE / layout.HELPER_PID).read_text().splitlines()
    if not (raw and raw[0].isdigit()):
        return None
    try:  # a pid file outlives a killed helper: never signal a process group that is not this root's helper
        cmdline = Path(f"/proc/{raw[0]}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return int(raw[0]) if b"agentmsg.cli.serve" in cmdline and os.fsencode(str(root)) in cmdline else None


def stop(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def stop_all(root: Path) -> None:
    """End every helper this test's commands started for ``root`` (found by their command line)."""
    for name in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"agentmsg.cli.serve" in cmdline and os.fsencode(str(root)) in cmdline:
            try:
                os.killpg(int(name), signal.SIGKILL)
            except ProcessLookupError:
                pass


def until(check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


# ---- the pieces --------------------------------------------------------------------------------------------


def test_the_socket_name_is_the_layouts() -> None:
    assert (thin.IDLE, thin.SOCK) == (layout.IDLE, layout.HELPER_SOCK)


def test_the_root_the_client_finds_is_the_one_the_command_resolves(tmp_path: Path) -> None:
    from agentmsg.paths import resolve_root_str

    env = {"HOME": str(tmp_path), "AGENTMSG_HOME": str(tmp_path / "r")}
    assert thin.root_of(["send", "--body", "x"], env) == resolve_root_str(None, env)[0]
    assert thin.root_of(["inbox", "--root", "/elsewhere/a", "--root=/elsewhere/b"], env) == "/elsewhere/b"
    assert thin.root_of(["send", "--", "--root", "/no"], env) == str(tmp_path / "r")
    assert thin.root_of(["inbox"], {"AGENTMSG_HOME": "relative"}) is None  # the in-process run says why


def test_the_in_process_commands_are_never_forwarded() -> None:
    for name in ("watch", "mcp", "top", "sync", "spawn", "kill", "resume", "fork"):
        assert not thin.forwardable([name, "--collab", "x"]) and not thin.forwardable(["--store", "u", name])
    for group in ("install", "uninstall", "run", "guard"):
        assert not thin.forwardable([group, next(iter(app.GROUPS[group]))])
    assert not thin.forwardable(["wake", "on"]) and thin.forwardable(["wake", "status"])
    assert thin.forwardable(["send"]) and thin.forwardable([]) and thin.forwardable(["--help"])
    assert thin.idempotent(["send", "--id", MSG, "--body", "x"]) and thin.idempotent(["send", f"--id={MSG}"])
    assert not thin.idempotent(["send", "--body", "x"]) and not thin.idempotent(["send", "--id", MSG, "--body-stdin"])
    assert not thin.idempotent(["ack", "--id", MSG])


def test_a_peer_of_another_user_is_refused_on_both_sides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``SO_PEERCRED``: the client refuses a socket another user listens on; the helper forks nothing for a
    client of another user and closes the connection (that client runs the command in-process)."""
    import socket

    path = tmp_path / layout.IDLE / layout.HELPER_SOCK
    path.parent.mkdir()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    try:
        assert thin.peer(thin.connect(str(tmp_path)))[1] == os.getuid()  # type: ignore[attr-defined]
        monkeypatch.setattr(thin, "peer", lambda sock: (1, os.getuid() + 1, 0))
        with pytest.raises(PermissionError):
            thin.connect(str(tmp_path))

        class Helper:
            root = str(tmp_path)

        forked: list[object] = []
        monkeypatch.setattr("agentmsg.runtime.spawn.fork_child", lambda body: forked.append(body) or 1)
        server = serve.Server(Helper(), "tag")  # type: ignore[arg-type]
        left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        left.connect(str(path))
        conn, _ = listener.accept()
        server.start(conn)
        assert forked == [] and server.children == set()
    finally:
        listener.close()


def test_the_launchers_client_is_the_one_thin_py_holds() -> None:
    """bin/agentmsg runs thin.CLIENT (the text is in both: the launcher is a shell script)."""
    text = (REPO_ROOT / "bin" / "agentmsg").read_text()
    found = re.search(r"^client='([^']*)'$", text, re.M)
    assert found and found.group(1) == thin.CLIENT.rstrip("\n")


#: Records the environment a command's interpreter starts with (``site`` imports it from ``PYTHONPATH``).
SITECUSTOMIZE = ("import json, os, sys\nif os.environ.get('THIN_TEST_ENV_OUT'):\n"
                 "    with open(os.environ['THIN_TEST_ENV_OUT'], 'w') as fh:\n"
                 "        json.dump(dict(os.environ, ARGV0=sys.argv[0]), fh)\n")


def _launcher_copy(where: Path, *, wheel: bool) -> tuple[Path, Path]:
    """A plugin copy (``bin/agentmsg`` beside the package) or a wheel's layout (``agentmsg/_plugin/bin``), its
    package at version 7.7.7: ``(the launcher, the folder holding the package)``."""
    code = where / "site" if wheel else where / "plugin"
    shutil.copytree(REPO_ROOT / "agentmsg", code / "agentmsg", ignore=shutil.ignore_patterns("__pycache__"))
    init = code / "agentmsg" / "__init__.py"
    init.write_text(re.sub(r'__version__ = "[^"]+"', '__version__ = "7.7.7"', init.read_text()))
    bindir = code / "agentmsg" / "_plugin" / "bin" if wheel else code / "bin"
    bindir.mkdir(parents=True)
    shutil.copy(REPO_ROOT / "bin" / "agentmsg", bindir / "agentmsg")
    return bindir / "agentmsg", code


@pytest.mark.parametrize("how", ["absolute", "relative", "dot", "linked folder", "wheel", "slow"])
def test_the_launchers_client_finds_the_code_as_the_launcher_would(tmp_path: Path, how: str) -> None:
    """The client resolves the folder holding the package (the launcher's ``cd "$bindir/.." && pwd -P``, and a
    wheel's ``agentmsg/_plugin``) without a subshell, whichever way the launcher is named; where it cannot, the
    launcher's own way (``AGENTMSG_LAUNCH_SLOW``, never left in the command's environment).  Either way the
    command runs the copy's code with that folder first on ``PYTHONPATH``, as before."""
    import sysconfig

    launcher, code = _launcher_copy(tmp_path, wheel=how == "wheel")
    data = tmp_path / "data"
    venv = data / "agentmsg" / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (venv / ".agentmsg-ready").touch()
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "sitecustomize.py").write_text(SITECUSTOMIZE)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], capture_output=True, text=True, check=True).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    out = tmp_path / "env.json"
    env = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(data), "PATH": os.environ["PATH"], "AGENTMSG_NO_HELPER": "1",
           "PYTHONPATH": str(probe), "THIN_TEST_ENV_OUT": str(out), "AGENTMSG_HOME": str(tmp_path / "root")}
    cwd, argv0 = tmp_path, str(launcher)
    if how == "relative":
        cwd, argv0 = code, str(launcher.relative_to(code))
    elif how == "dot":
        cwd, argv0 = launcher.parent, "./agentmsg"
    elif how == "linked folder":
        (tmp_path / "link").symlink_to(code)
        argv0 = str(tmp_path / "link" / "bin" / "agentmsg")
    elif how == "slow":
        env["AGENTMSG_LAUNCH_SLOW"] = "1"
    done = subprocess.run(["sh", argv0, "--version"], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "7.7.7" in done.stdout, done.stdout + done.stderr
    seen = json.loads(out.read_text())
    assert seen["PYTHONPATH"] == f"{code}:{probe}"
    assert "AGENTMSG_LAUNCH_SLOW" not in seen
    # the client ran first (it sets the mark before the in-process run), except on the launcher's own way
    assert seen.get(thin.TRIED) == (None if how == "slow" else "1")


def test_the_client_imports_nothing_heavy(tmp_path: Path) -> None:
    """What the client loads before it knows whether a helper runs: the standard library's core only."""
    probe = ("import sys\nsys.path.insert(0, sys.argv[1])\nfrom agentmsg.cli import thin\n"
             "env = {'AGENTMSG_HOME': sys.argv[2], 'HOME': sys.argv[2]}\n"
             "assert thin.forward(['send', '--body', 'x'], env=env) is None\n"
             "print(' '.join(sorted(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", probe, str(REPO_ROOT), str(tmp_path)],
                         capture_output=True, text=True, check=True).stdout.split()
    ours = {m for m in out if m.startswith("agentmsg")}
    assert ours == {"agentmsg", "agentmsg.cli", "agentmsg.cli.thin", "agentmsg.paths", "agentmsg.pathops"}
    # not even os (nothing loads it under -S) or __future__ (a search of the standard library's folder)
    heavy = {"typer", "click", "rich", "json", "re", "socket", "signal", "enum", "subprocess", "os", "__future__"}
    assert not heavy & set(out)


def test_no_helper_means_in_process_and_no_helper_started(tmp_path: Path) -> None:
    root, home = tmp_path / "root", tmp_path / "home"
    off = env_for(root, home, helper=False)
    assert cli(["open", "--alias", "a", "--label", "t", "--task", "x", "--self", ALICE], off)[0] == 0
    assert cli(["status", "--self", ALICE], off, client=True)[0] == NOT_FORWARDED
    assert doorbell.duties(str(root)) is None


# ---- every command, both ways ----------------------------------------------------------------------------

#: Each command of the typer application (``agentmsg --help``'s tree) and how it is run, in order; every one
#: runs once in each root.  The commands that stay in-process (:data:`thin.IN_PROCESS`) are checked not to be
#: forwarded (their --help runs both ways).
SCRIPT: list[tuple[str, list[str], bytes]] = [
    ("version", ["version"], b""),
    ("open", ["open", "--alias", "z", "--label", "t2", "--task", "y", "--self", "human:erin"], b""),
    ("join", ["join", "--alias", "d", "--collab", "t", "--self", "human:dave"], b""),
    ("invite", ["invite", "--collab", "t", "--self", ALICE], b""),
    ("policy", ["policy", "open", "--collab", "t", "--self", ALICE], b""),
    ("send", ["send", "--collab", "t", "--self", ALICE, "--to", "b", "--body", "hello", "--subject", "s",
              "--id", MSG, "--kind", "request"], b""),
    ("send", ["send", "--collab", "t", "--self", BOB, "--to", "all", "--body-stdin", "--id", MSG2], b"from stdin\n"),
    ("send", ["send", "--collab", "t", "--self", ALICE, "--to", "nobody", "--body", "x"], b""),
    ("inbox", ["inbox", "--collab", "t", "--self", BOB], b""),
    ("inbox", ["inbox", "--collab", "t", "--self", CAROL, "--json"], b""),
    ("show", ["show", MSG, "--collab", "t", "--self", BOB], b""),
    ("ack", ["ack", MSG, "--collab", "t", "--self", BOB], b""),
    ("notify", ["notify", "--retry", MSG, "--collab", "t", "--self", ALICE], b""),
    ("status", ["status", "--collab", "t", "--self", ALICE], b""),
    ("collabs", ["collabs", "--self", ALICE], b""),
    ("roster", ["roster", "--collab", "t", "--self", ALICE], b""),
    ("registry", ["registry", "--collab", "t", "--self", ALICE], b""),
    ("search", ["search", "hello", "--collab", "t", "--self", ALICE], b""),
    ("claim", ["claim", "src/a.py", "--collab", "t", "--self", ALICE, "--reason", "r"], b""),
    ("claims", ["claims", "--collab", "t", "--self", BOB], b""),
    ("claim", ["claim", "src/a.py", "--collab", "t", "--self", BOB], b""),
    ("release", ["release", "--all", "--collab", "t", "--self", ALICE], b""),
    ("handoffs", ["handoffs", "--collab", "t", "--self", ALICE], b""),
    ("gates", ["gates", "--collab", "t", "--self", ALICE], b""),
    ("task show", ["task", "show", MSG, "--collab", "t", "--self", ALICE], b""),
    ("template list", ["template", "list"], b""),
    ("template show", ["template", "show", "task"], b""),
    ("log append", ["log", "append", "--text", "a note", "--collab", "t", "--self", ALICE], b""),
    ("log append", ["log", "append", "--stdin", "--collab", "t", "--self", BOB], b"note from stdin"),
    ("log show", ["log", "show", "--collab", "t", "--self", ALICE], b""),
    ("log render", ["log", "render", "--collab", "t", "--self", ALICE], b""),
    ("delivery enable", ["delivery", "enable", "--collab", "t", "--self", BOB], b""),
    ("delivery inspect", ["delivery", "inspect", "--collab", "t", "--self", BOB], b""),
    ("delivery retry", ["delivery", "retry", "--message", MSG, "--attempt", "x", "--collab", "t", "--self", BOB],
     b""),
    ("delivery midturn", ["delivery", "midturn", "on", "--collab", "t", "--self", BOB], b""),
    ("delivery disable", ["delivery", "disable", "--collab", "t", "--self", BOB], b""),
    ("wake status", ["wake", "status", "--collab", "t", "--self", BOB], b""),
    ("wake off", ["wake", "off", "--collab", "t", "--self", BOB], b""),
    ("handover", ["handover", "--to", "human:dave", "--collab", "t", "--self", CAROL], b""),
    ("verify", ["verify", "--collab", "t", "--self", ALICE], b""),
    ("repair", ["repair", "--collab", "t", "--self", ALICE], b""),
    ("doctor", ["doctor", "--json"], b""),
    ("db migrate", ["db", "migrate"], b""),
    ("db grant", ["db", "grant", "--role", "r", "--collab", "t"], b""),
    ("db move", ["db", "move", "--collab", "t"], b""),
    ("leave", ["leave", "--collab", "t", "--self", CAROL], b""),
    ("close", ["close", "--collab", "t", "--self", ALICE], b""),
    ("", [], b""),
    ("", ["--help"], b""),
    ("", ["--version"], b""),
    ("", ["no-such-command"], b""),
    ("", ["send", "--no-such-option"], b""),
]


def _every_command() -> set[str]:
    return set(app.COMMANDS) | {f"{g} {c}" for g, commands in app.GROUPS.items() for c in commands}


def _in_process(name: str) -> bool:
    return not thin.forwardable(name.split())


def test_the_script_runs_every_command_the_application_has() -> None:
    run = {name for name, _args, _stdin in SCRIPT if name}
    assert run | {n for n in _every_command() if _in_process(n)} == _every_command()
    assert not {n for n in run if _in_process(n)}


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z| UTC)?|\b1\d{9}(\.\d+)?\b")
HEX = re.compile(r"\b[0-9a-f]{16,}\b")
TICKET = re.compile(r"amt-[A-Za-z0-9_-]+")
AGO = re.compile(r"\b\d+(\.\d+)? ?(ms|s|m|h|d)\b( ago)?")
#: ``status`` names the processes it runs for the root: the helper runs for one root and not the other.
HELPER_LINE = re.compile(r"^helper: .*\n", re.MULTILINE)


def normal(text: str, root: Path) -> str:
    text = HELPER_LINE.sub("", text.replace(str(root), "<ROOT>"))
    for pattern, word in ((UUID, "<ID>"), (TIME, "<TIME>"), (HEX, "<HEX>"), (TICKET, "<TICKET>"), (AGO, "<AGO>")):
        text = pattern.sub(word, text)
    return re.sub(r" {2,}", " ", text)  # columns padded to an age's width


def records(root: Path) -> dict[str, str]:
    """Every record file of the root (truth and the rest that is not about the processes), normalized."""
    out = {}
    for folder in sorted((root / "collabs").iterdir()):
        label = json.loads((folder / "collab.jsonl").read_text().splitlines()[0])["label"]  # ids differ: by label
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.suffix in (".jsonl", ".json", ".md") and not path.name.startswith("."):
                out[f"{label}/{normal(str(path.relative_to(folder)), root)}"] = normal(path.read_text(), root)
    return out


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    base = tmp_path_factory.mktemp("thin")
    home = base / "home"
    home.mkdir()
    plain, served = base / "a", base / "b"
    for root in (plain, served):
        env = env_for(root, home, helper=False)
        for args in (["open", "--alias", "a", "--label", "t", "--task", "x", "--self", ALICE],
                     ["join", "--alias", "b", "--collab", "t", "--self", BOB],
                     ["join", "--alias", "c", "--collab", "t", "--self", CAROL]):
            assert cli(args, env)[0] == 0
    proc = start_helper(served, env_for(served, home, helper=True, AGENTMSG_AHEAD_IDLE="600"))
    try:
        yield plain, served, home
    finally:
        stop(proc)
        stop_all(served)


def test_every_command_gives_the_same_output_exit_code_and_records_with_and_without_the_helper(
        roots: tuple[Path, Path, Path]) -> None:
    plain, served, home = roots
    # doctor asks the plugin launcher too: each root its own launcher folder (<ROOT>-data once normalized)
    extra = {"PIP_NO_INDEX": "1", "AGENTMSG_BUILD_WAIT": "0"}
    import threading

    results: list[tuple[int, str, str]] = []  # the roots are independent: one runs beside the other
    inside = threading.Thread(target=lambda: results.extend(
        cli(args, env_for(plain, home, helper=False, XDG_DATA_HOME=f"{plain}-data", **extra), stdin=stdin)
        for _name, args, stdin in SCRIPT))
    inside.start()
    served_results = [cli(args, env_for(served, home, helper=True, XDG_DATA_HOME=f"{served}-data", **extra),
                          client=True, stdin=stdin) for _name, args, stdin in SCRIPT]
    inside.join()
    for (name, args, _stdin), (code_a, out_a, err_a), (code_b, out_b, err_b) in zip(SCRIPT, results, served_results,
                                                                                      strict=True):
        assert code_b != NOT_FORWARDED, (name, args, err_b)
        a = (code_a, normal(out_a, plain), normal(err_a, plain))
        b = (code_b, normal(out_b, served), normal(err_b, served))
        assert a == b, (args, _diff(a, b))
    for name in sorted(n for n in _every_command() if _in_process(n)):
        code_b, out_b, err_b = cli([*name.split(), "--help"], env_for(served, home, helper=True), client=True)
        assert code_b == NOT_FORWARDED
    assert records(plain) == records(served)
    assert serving(served) is not None  # the same helper served every command


def _diff(a: tuple[int, str, str], b: tuple[int, str, str]) -> str:
    import difflib

    return "\n".join(difflib.unified_diff(f"{a[0]}\n{a[1]}\n{a[2]}".splitlines(),
                                          f"{b[0]}\n{b[1]}\n{b[2]}".splitlines(), lineterm=""))


#: A parent for the command (run as its child, on the same stdout): it records a Claude Code session's facts for
#: its own pid first, so identity's ancestry rule finds that session from the command's ancestors, and from
#: nothing the helper descends from.
WRAPPER = ("import json, os, subprocess, sys\nfrom agentmsg.runtime.procs import proc_stat\n"
           "me = proc_stat(os.getpid())\n"
           "facts = {'pin': 'claude-code:S1', 'facts': {'host': 'claude', 'session': 'S1', 'pid': os.getpid(),"
           " 'pid_start': me[2]}, 'turn': 'idle', 'turn_at': 0}\n"
           "open(sys.argv[1], 'w').write(json.dumps(facts))\n"
           "sys.exit(subprocess.run(sys.argv[2:]).returncode)\n")


def test_the_client_passes_the_terminal_and_its_pid_for_the_ancestry_checks(roots: tuple[Path, Path, Path]) -> None:
    """A tty on stdout stays a tty (``status`` prints another form on one), and identity's ancestry rule starts
    from the client: it finds the host session recorded for the client's parent, which the helper does not
    descend from."""
    plain, served, home = roots
    outs = []
    for root, helper in ((plain, False), (served, True)):
        (root / layout.WAKE).mkdir(exist_ok=True)
        facts = root / layout.WAKE / f"{layout.pin_key('claude-code:S1')}.{layout.SESSION_FACTS}"
        env = env_for(root, home, helper=helper)
        argv = [sys.executable, "-c", CLIENT] if helper else [sys.executable, "-m", "agentmsg.cli"]
        code, out, _err = on_tty([sys.executable, "-c", WRAPPER, str(facts), *argv, "status"], env, root.parent)
        assert code != NOT_FORWARDED
        outs.append((code, normal(out.replace("\r\n", "\n"), root)))
    assert outs[0] == outs[1]
    assert "claude-code:S1" in outs[0][1]  # the ancestry rule did decide, from the client's parent
    piped = cli(["status"], env_for(plain, home, helper=False))
    assert normal(piped[1], plain) != outs[0][1]  # the terminal changed the form: the served run kept it


# ---- versions --------------------------------------------------------------------------------------------


def _copy(tmp_path: Path, version: str) -> Path:
    """A copy of the package whose version is ``version`` (a client or helper of another version).  It runs
    with ``python -S`` and its dependencies on ``PYTHONPATH``: an editable install's finder (site) would
    import this checkout instead."""
    where = tmp_path / f"v{version}"
    shutil.copytree(REPO_ROOT / "agentmsg", where / "agentmsg", ignore=shutil.ignore_patterns("__pycache__"))
    init = where / "agentmsg" / "__init__.py"
    init.write_text(re.sub(r'__version__ = "[^"]+"', f'__version__ = "{version}"', init.read_text()))
    return where


def _as(env: dict[str, str], copy: Path) -> dict[str, str]:
    import sysconfig

    return dict(env, PYTHONPATH=f"{copy}{os.pathsep}{sysconfig.get_paths()['purelib']}", THIN_TEST_FLAGS="-S")


def test_a_client_and_helper_of_different_versions_never_talk_and_an_older_one_never_replaces_a_newer(
        tmp_path: Path) -> None:
    root, home = tmp_path / "root", tmp_path / "home"
    old, new = _copy(tmp_path, "0.0.1"), _copy(tmp_path, "9.0.0")
    assert cli(["open", "--alias", "a", "--label", "t", "--task", "x", "--self", ALICE],
               env_for(root, home, helper=False))[0] == 0
    here = env_for(root, home, helper=True)
    proc = start_helper(root, here)
    try:
        for copy in (old, new):
            env = _as(here, copy)
            got = cli(["status", "--self", ALICE], env, client=True)
            assert got[0] == NOT_FORWARDED, (copy, got)
        # The older copy runs in-process and leaves the newer helper alone ...
        assert cli(["status", "--self", ALICE], _as(here, old))[0] == 0
        assert serving(root) == proc.pid
        # ... the newer copy runs in-process and starts its own, which takes the root over.
        assert cli(["status", "--self", ALICE], _as(here, new))[0] == 0
        proc.wait(timeout=60)  # asked to leave
        until(lambda: serving(root) not in (None, proc.pid))
        assert "9.0.0|" in (root / layout.IDLE / layout.HELPER_PID).read_text().splitlines()[2]
        assert cli(["status", "--self", ALICE], _as(here, new), client=True)[0] == 0
        assert cli(["status", "--self", ALICE], here, client=True)[0] == NOT_FORWARDED
    finally:
        stop(proc)
        stop_all(root)


def test_a_root_too_long_for_a_socket_address_is_served_through_the_folders_descriptor(tmp_path: Path) -> None:
    """``sun_path`` holds 108 bytes: the helper binds, and the client connects, through ``/proc/self/fd``."""
    root, home = tmp_path / ("long-" * 20) / "root", tmp_path / "home"
    assert len(os.fsencode(str(root / layout.IDLE / layout.HELPER_SOCK))) > thin.SUN_PATH_MAX
    root.parent.mkdir()
    assert cli(["open", "--alias", "a", "--label", "t", "--task", "x", "--self", ALICE],
               env_for(root, home, helper=False))[0] == 0
    env = env_for(root, home, helper=True)
    proc = start_helper(root, env)  # waits for the socket file
    try:
        code, out, err = cli(["status", "--self", ALICE], env, client=True)
        assert code == 0 and "alice" in out, err  # forwarded (250 when the client ran nothing)
    finally:
        stop(proc)
        stop_all(root)


def test_a_helper_whose_code_changed_on_disk_refuses_and_leaves(tmp_path: Path) -> None:
    root, home = tmp_path / "root", tmp_path / "home"
    copy = _copy(tmp_path, "0.1.0")
    env = _as(env_for(root, home, helper=True), copy)
    assert cli(["open", "--alias", "a", "--label", "t", "--task", "x", "--self", ALICE],
               env_for(root, home, helper=False))[0] == 0
    proc = start_helper(root, env)
    try:
        assert cli(["status", "--self", ALICE], env, client=True)[0] == 0
        source = copy / "agentmsg" / "domain" / "rules.py"
        source.write_text(source.read_text() + "\n")
        assert cli(["status", "--self", ALICE], env, client=True)[0] == NOT_FORWARDED
        proc.wait(timeout=60)  # it left
        assert serving(root) is None
    finally:
        stop(proc)
        stop_all(root)


@pytest.mark.parametrize("inotify", [True, False])
def test_the_code_watch_sees_every_change_to_a_module_and_nothing_else(tmp_path: Path, inotify: bool) -> None:
    """The helper's check before each command (serve.CodeWatch): with inotify it looks at the files only after
    the kernel reported something in the package's folders; a module edited in place, added, removed, or added in
    a folder made after the watch began is a change; a byte-identical rewrite (mtime kept) or a file that is not
    a module is not.  Without inotify every check takes the fingerprint."""
    top = tmp_path / "pkg"
    (top / "sub").mkdir(parents=True)
    (top / "a.py").write_text("A = 1\n")
    (top / "sub" / "b.py").write_text("B = 1\n")
    watch = serve.CodeWatch(str(top))
    if not inotify:
        watch.close()
    assert (watch.fd is not None) == inotify
    try:
        assert watch.unchanged() and watch.unchanged()
        (top / "notes.txt").write_text("not code\n")  # an event, and no change to the code
        assert watch.unchanged()
        stat = (top / "a.py").stat()
        (top / "a.py").write_text("A = 1\n")
        os.utime(top / "a.py", ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert watch.unchanged()
        (top / "new").mkdir()
        assert watch.unchanged()  # a folder, no module yet: the watch now covers it
        (top / "new" / "c.py").write_text("C = 1\n")
        assert not watch.unchanged()
        for change in ("edit", "remove"):
            watch.close()
            watch = serve.CodeWatch(str(top))
            if not inotify:
                watch.close()
            assert watch.unchanged()
            if change == "edit":
                with open(top / "sub" / "b.py", "a") as fh:
                    fh.write("B = 2\n")
            else:
                (top / "a.py").unlink()
            assert not watch.unchanged(), change
    finally:
        watch.close()


# ---- a helper killed mid-request ---------------------------------------------------------------------------


def _held_send(env: dict[str, str], args: list[str]) -> subprocess.Popen[bytes]:
    """A forwarded send (the console script's path) whose body the helper's child reads from a pipe we hold."""
    return subprocess.Popen([sys.executable, "-m", "agentmsg.cli", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=env["AGENTMSG_HOME"])


def _serving_in(helper: int, cwd: Path) -> int | None:
    """The helper's child that runs a command in ``cwd`` (the spare it keeps forked ahead runs none)."""
    from agentmsg.runtime.procs import proc_stat

    for name in os.listdir("/proc"):
        if name.isdigit():
            found = proc_stat(int(name))
            try:
                here = os.readlink(f"/proc/{name}/cwd")
            except OSError:
                continue
            if found is not None and found[1] == helper and here == str(cwd):
                return int(name)
    return None


@pytest.fixture
def one(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    root, home = tmp_path / "root", tmp_path / "home"
    env = env_for(root, home, helper=False)
    for args in (["open", "--alias", "a", "--label", "t", "--task", "x", "--self", ALICE],
                 ["join", "--alias", "b", "--collab", "t", "--self", BOB]):
        assert cli(args, env)[0] == 0
    yield root, home
    stop_all(root)


def _stored(root: Path, home: Path) -> list[str]:
    code, out, err = cli(["inbox", "--history", "--all", "--collab", "t", "--self", BOB, "--json"],
                         env_for(root, home, helper=False))
    assert code == 0, err
    return [m["id"] for m in json.loads(out)["result"]["messages"]]


def test_killed_mid_send_a_send_with_its_id_runs_again_in_process_once(one: tuple[Path, Path]) -> None:
    root, home = one
    env = env_for(root, home, helper=True)
    proc = start_helper(root, env)
    try:
        send = _held_send(env, ["send", "--collab", "t", "--self", ALICE, "--to", "b", "--id", MSG,
                                "--body-file", "/dev/stdin"])
        until(lambda: _serving_in(proc.pid, root) is not None)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        _out, err = send.communicate(b"the body", timeout=60)
        assert send.returncode == 0, err
        assert _stored(root, home) == [MSG]
    finally:
        stop(proc)


def test_killed_mid_send_a_send_without_an_id_says_so_in_one_line(one: tuple[Path, Path]) -> None:
    root, home = one
    env = env_for(root, home, helper=True)
    proc = start_helper(root, env)
    try:
        send = _held_send(env, ["send", "--collab", "t", "--self", ALICE, "--to", "b", "--body-stdin"])
        until(lambda: _serving_in(proc.pid, root) is not None)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        out, err = send.communicate(b"the body", timeout=60)
        assert send.returncode == OutcomeUnknown.code == 22 and out == b""
        assert err.decode().count("\n") == 1 and err.decode().startswith("outcome unknown: ")
        assert "ended before it finished" in err.decode()
        assert _stored(root, home) == []
    finally:
        stop(proc)


def test_sigkill_at_random_points_during_a_stream_of_sends_loses_nothing_and_stores_nothing_twice(
        one: tuple[Path, Path]) -> None:
    """The console script's path (``python -m agentmsg.cli``): forwarded while a helper runs, in-process (which
    starts the next helper) while none does; a killer takes the helper down at random moments."""
    import random
    import threading
    import uuid

    root, home = one
    env = env_for(root, home, helper=True)
    ids = [str(uuid.uuid4()) for _ in range(24)]
    kills = 0
    done = threading.Event()

    def killer() -> None:
        nonlocal kills
        rng = random.Random(7)
        while not done.is_set():
            time.sleep(rng.uniform(0.0, 0.15))
            pid = serving(root)
            if pid:
                try:
                    os.killpg(pid, signal.SIGKILL)
                    kills += 1
                except ProcessLookupError:
                    pass

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        for i, msg in enumerate(ids):
            code, _out, err = cli(["send", "--collab", "t", "--self", ALICE, "--to", "b", "--id", msg,
                                  "--body", f"message {i}"], env)
            assert code == 0, err
    finally:
        done.set()
        thread.join()
        pid = serving(root)
        if pid:
            os.killpg(pid, signal.SIGKILL)
    assert kills > 0
    assert sorted(_stored(root, home)) == sorted(ids)
