"""Trust, round two: files that are not what they seem (class 5) and internal errors that were reachable (class 6).

Each test asserts the exact outcome: exit code, the one stderr line, and what
is (or is not) on disk afterwards.  The adversarial corpus
(tests/adversarial/cases.py, "trust, round two") runs the same classes
through real processes for many more paths.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agentmsg import fsio, records
from agentmsg.backends.file import journal
from agentmsg.errors import StoreFailed, UnsafePath
from tests.support.cli_helpers import REPO_ROOT, clean_env, run, run_json, snapshot
from tests.support.pins import DRIVER_PIN, REVIEWER_PIN

NOT_REGULAR = "is not a regular file (a FIFO, socket, device or directory); refusing to use it"


def _send(root: Path, collab: str, body: str = "hello", **kw: str) -> tuple[int, str]:
    code, _out, err = run("send", "--collab", collab, "--self", DRIVER_PIN, "--to", "reviewer", "--subject", "s",
                          "--body", body, root=root, **kw)
    return code, err


# ---- class 5: FIFOs, sockets, hard links --------------------------------------------------------------------


@pytest.mark.parametrize("flags", [os.O_RDONLY, os.O_RDWR | os.O_APPEND | os.O_CREAT, os.O_RDWR | os.O_CREAT])
def test_fsio_refuses_a_fifo_without_blocking(tmp_path: Path, flags: int) -> None:
    fifo = tmp_path / "x.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(UnsafePath, match="is not a regular file"):
        fsio._open(fifo, flags)


def test_every_fsio_reader_and_writer_refuses_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "x.jsonl"
    os.mkfifo(fifo)
    calls = [
        lambda: fsio.read_bytes(fifo), lambda: list(fsio.lines(fifo)), lambda: list(fsio.last_lines(fifo)),
        lambda: fsio.next_offset(fifo), lambda: fsio.file_size(fifo), lambda: fsio.append(fifo, b"x\n"),
        lambda: fsio.refuse_link(fifo), lambda: fsio.locked(fifo, 0.1).__enter__(),
        lambda: journal.Journal(fifo).last(),
    ]
    for call in calls:
        with pytest.raises(UnsafePath) as err:
            call()
        assert str(err.value) == f"{fifo} {NOT_REGULAR}"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_socket_is_refused_too(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "s.jsonl"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        for call in (lambda: fsio.read_bytes(path), lambda: fsio.append(path, b"x\n")):
            with pytest.raises(UnsafePath, match="is not a regular file"):
                call()


def test_atomic_write_replaces_a_fifo_and_never_writes_through_a_hard_link(tmp_path: Path) -> None:
    fifo = tmp_path / "registry.yaml"
    os.mkfifo(fifo)
    fsio.atomic_write(fifo, b"doc\n")
    assert fifo.read_bytes() == b"doc\n" and stat.S_ISREG(os.lstat(fifo).st_mode)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"mine\n")
    linked = tmp_path / "state.json"
    os.link(outside, linked)
    fsio.atomic_write(linked, b"{}")
    assert outside.read_bytes() == b"mine\n" and linked.read_bytes() == b"{}"


def test_append_refuses_a_hard_link_and_writes_nothing(tmp_path: Path) -> None:
    outside = tmp_path / "bashrc"
    outside.write_bytes(b"export PATH\n")
    linked = tmp_path / "collaboration.md"
    os.link(outside, linked)
    for call in (lambda: fsio.append(linked, b"peer text\n"), lambda: fsio.refuse_link(linked)):
        with pytest.raises(UnsafePath) as err:
            call()
        assert str(err.value) == f"{linked} has 2 hard links; refusing to write through it"
    assert outside.read_bytes() == b"export PATH\n"


def test_cli_refuses_a_fifo_registry_within_a_second(collab) -> None:
    reg = collab.dir / "registry.yaml"
    reg.unlink()
    os.mkfifo(reg)
    for argv in (("status", "--collab", collab.id, "--self", REVIEWER_PIN), ("registry", "--collab", collab.id),
                 ("inbox", "--collab", collab.id, "--self", REVIEWER_PIN)):
        code, _out, err = run(*argv, root=collab.root, timeout=20)
        assert (code, err) == (12, f"unsafe path: {reg} {NOT_REGULAR}\n")


def test_cli_refuses_a_fifo_lock_and_stores_nothing(collab) -> None:
    lock = collab.dir / "write.lock"
    lock.unlink()
    os.mkfifo(lock)
    before = snapshot(collab.root)
    code, err = _send(collab.root, collab.id)
    assert (code, err) == (12, f"unsafe path: {lock} {NOT_REGULAR}\n")
    assert snapshot(collab.root) == before


def test_hard_linked_transcript_is_refused_before_anything_is_stored(collab, tmp_path: Path) -> None:
    _send(collab.root, collab.id, "first")
    md = collab.dir / "collaboration.md"
    outside = tmp_path / "outside.md"
    os.replace(md, outside)
    os.link(outside, md)
    kept, before = outside.read_bytes(), snapshot(collab.root)
    code, err = _send(collab.root, collab.id, "second: peer text")
    assert (code, err) == (12, f"unsafe path: {md} has 2 hard links; refusing to write through it\n")
    assert snapshot(collab.root) == before and outside.read_bytes() == kept


def test_hook_fails_open_on_a_fifo_and_returns_quickly(collab) -> None:
    from tests.support.facade import Draft, FileStore
    from tests.support.helpers_hooks import run_hook

    draft = Draft(to="reviewer", kind="request", priority="normal", subject="s", body="b")
    FileStore(collab.root).send(collab.id, collab.driver, draft)
    reg = collab.dir / "registry.yaml"
    reg.unlink()
    os.mkfifo(reg)
    res = run_hook("claude", "UserPromptSubmit", collab.root.parent, collab.root,
                   REVIEWER_PIN.split(":", 1)[1], timeout=10)
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")
    log = (collab.root / "hooks.log").read_text().splitlines()
    assert len(log) == 1 and f"{reg} {NOT_REGULAR}" in log[0]


# ---- hooks/run: its own diagnostics ---------------------------------------------------------------------------


def _launcher_without_python(tmp_path: Path, root: Path) -> subprocess.CompletedProcess[bytes]:
    env = {"PATH": str(tmp_path / "empty"), "AGENTMSG_HOME": str(root), "HOME": str(tmp_path),
           "CLAUDE_PLUGIN_DATA": str(tmp_path / "data")}
    return subprocess.run(["/bin/sh", str(REPO_ROOT / "hooks" / "run"), "claude"], input=b"{}", env=env,
                          capture_output=True, timeout=20, check=False)


@pytest.mark.parametrize("kind", ["symlink", "fifo", "hardlink"])
def test_launcher_never_appends_through_a_planted_hooks_log(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    outside = tmp_path / "outside.log"
    outside.write_bytes(b"")
    log = root / "hooks.log"
    if kind == "symlink":
        log.symlink_to(outside)
    elif kind == "hardlink":
        os.link(outside, log)
    else:
        os.mkfifo(log)
    done = _launcher_without_python(tmp_path, root)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert outside.read_bytes() == b""


def test_launcher_appends_to_a_plain_hooks_log(tmp_path: Path) -> None:
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    _launcher_without_python(tmp_path, root)
    _launcher_without_python(tmp_path, root)
    lines = (root / "hooks.log").read_text().splitlines()
    assert len(lines) == 2 and all("no python3 >= 3.10 on PATH; hook skipped" in ln for ln in lines)


def test_launcher_ignores_a_fifo_cache_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    os.mkfifo(data / "python3-path")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CLAUDE_PLUGIN_DATA": str(data),
           "AGENTMSG_HOME": str(tmp_path / "state")}
    done = subprocess.run(["/bin/sh", str(REPO_ROOT / "hooks" / "run"), "claude"], input=b"not json", env=env,
                          capture_output=True, timeout=20, check=False)
    assert (done.returncode, done.stderr) == (0, b"")


# ---- crash logs ------------------------------------------------------------------------------------------------


def _crash_in_child(home: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    code = ("import sys\nfrom agentmsg.service import commands as actions\nfrom agentmsg.cli.main import main\n"
            "def boom(*a, **k):\n    raise RuntimeError('boom')\n"
            "actions.inbox = boom\nsys.exit(main(sys.argv[1:]))\n")
    env = clean_env(home / "state", {"HOME": str(home)})
    return subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def test_crash_log_is_private_and_holds_no_argument_values(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".cache" / "agentmsg").mkdir(parents=True, mode=0o755)
    os.chmod(home / ".cache" / "agentmsg", 0o755)
    secret = "the body says hunter2"
    done = _crash_in_child(home, ["inbox", "--self", DRIVER_PIN, f"--collab={secret}", "--all"])
    log = home / ".cache" / "agentmsg" / "crash.log"
    assert done.returncode == 1
    assert done.stderr == f"error: internal error: RuntimeError: boom (details in {log})\n"
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(log.parent).st_mode) == 0o700
    text = log.read_text()
    assert "command=inbox options=--all --collab --self" in text
    assert secret not in text and DRIVER_PIN not in text and "argv" not in text


def test_crash_log_refuses_a_symlink(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = home / ".cache" / "agentmsg"
    folder.mkdir(parents=True)
    outside = tmp_path / "outside.log"
    outside.write_text("")
    (folder / "crash.log").symlink_to(outside)
    done = _crash_in_child(home, ["inbox", "--self", DRIVER_PIN])
    assert (done.returncode, done.stderr) == (1, "error: internal error: RuntimeError: boom\n")
    assert outside.read_text() == ""


# ---- class 6: internal errors that were reachable ---------------------------------------------------------------


def test_state_root_that_is_a_file(tmp_path: Path) -> None:
    root = tmp_path / "rootfile"
    root.write_text("x")
    for argv in (("status",), ("verify",), ("open", "--self", DRIVER_PIN, "--alias", "a", "--label", "l",
                                             "--task", "t")):
        code, _out, err = run(*argv, root=root)
        assert (code, err) == (12, f"unsafe path: {root} is not a directory\n"), argv
    assert root.read_text() == "x"


@pytest.mark.parametrize("sub", ["collabs", "pins"])
def test_non_directory_inside_the_root(tmp_path: Path, sub: str) -> None:
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    (root / sub).write_text("x")
    code, _out, err = run("open", "--self", DRIVER_PIN, "--alias", "a", "--label", "l", "--task", "t", root=root)
    assert (code, err) == (12, f"unsafe path: {root / sub} is not a directory\n")
    files = {rel for rel, (kind, _size, _sum) in snapshot(root).items() if kind != "dir"}
    assert files == {sub}  # at most an empty directory was made (the pin index's, checked first)


def test_notify_command_not_utf8_leaves_nothing(tmp_path: Path) -> None:
    root = tmp_path / "state"
    code, _out, err = run("open", "--self", DRIVER_PIN, "--alias", "a", "--label", "l", "--task", "t",
                          "--notify-command", "wake \udcff", root=root)
    assert code == 2 and err.startswith("usage: --notify-command is no longer accepted")
    assert not root.exists()


def test_latin1_codex_config_is_read(tmp_path: Path) -> None:
    from agentmsg.hosts import install as installer

    codex = tmp_path / "codex"
    codex.mkdir()
    (codex / "config.toml").write_bytes(b'# caf\xe9\n[plugins."agentmsg@m"]\nenabled = true\n')
    found = installer.detect(home=tmp_path, codex_home=codex)["codex"]
    assert found["plugin"] == [{"id": "agentmsg@m", "enabled": True}] and found["installed"]


def test_non_utf8_hooks_json_is_a_usage_error_and_nothing_is_written(tmp_path: Path) -> None:
    codex = tmp_path / "codex"
    codex.mkdir()
    (codex / "hooks.json").write_bytes(b'{"hooks": {}, "note": "caf\xe9"}')
    code, _out, err = run("install", "codex", "--codex-home", str(codex), env={"HOME": str(tmp_path)})
    assert code == 2 and err.startswith(f"usage: {codex / 'hooks.json'} is not valid JSON (")
    assert (codex / "hooks.json").read_bytes() == b'{"hooks": {}, "note": "caf\xe9"}'
    assert not (tmp_path / ".agents").exists()


def test_overlong_codex_home(tmp_path: Path) -> None:
    long = tmp_path / ("x" * 300)
    for cmd in ("install", "uninstall"):
        code, _out, err = run(cmd, "codex", "--codex-home", str(long), env={"HOME": str(tmp_path)})
        assert code == 2 and err.startswith(f"usage: {tmp_path}/xxxx") and err.endswith(": file name too long\n")
    assert not (tmp_path / ".agents").exists()


@pytest.mark.parametrize(("code", "exit_code", "text"), [
    (errno.ENOSPC, 8, "store failed: /r/x: no space left on the device; nothing was stored"),
    (errno.EDQUOT, 8, "store failed: /r/x: disk quota exceeded; nothing was stored"),
    (errno.EROFS, 8, "store failed: /r/x: read-only file system; nothing was stored"),
    (errno.EIO, 8, "store failed: /r/x: input/output error; nothing was stored"),
    (errno.EACCES, 12, "unsafe path: /r/x: permission denied"),
    (errno.ELOOP, 12, "unsafe path: /r/x: too many levels of symbolic links"),
    (errno.EISDIR, 12, "unsafe path: /r/x is a directory where a file belongs"),
    (errno.ENAMETOOLONG, 2, "usage: /r/x: file name too long"),
])
def test_os_errors_map_to_documented_codes(code: int, exit_code: int, text: str) -> None:
    from agentmsg.service.oserrors import os_error

    err = os_error(OSError(code, os.strerror(code), "/r/x"))
    assert err is not None and (err.code, err.line()) == (exit_code, text)
    assert os_error(OSError(errno.EINVAL, "bad")) is None  # anything unlisted stays an internal error


def test_os_error_in_a_command_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    from agentmsg.cli import admin
    from agentmsg.cli.main import main

    def full(*_a: object, **_k: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x"))

    monkeypatch.setattr(admin, "version", full)
    assert main(["version", "--root", str(tmp_path)]) == 8
    want = f"store failed: {tmp_path / 'x'}: no space left on the device; nothing was stored\n"
    assert capsys.readouterr().err == want


# ---- class 6: a failed append leaves no torn record -----------------------------------------------------------


def _failing_write(monkeypatch: pytest.MonkeyPatch, after: int, err: int = errno.ENOSPC) -> None:
    """os.write writes ``after`` bytes of the first call, then fails like a full disk."""
    real = os.write
    state = {"left": after}

    def write(fd: int, data: bytes) -> int:
        if state["left"] <= 0:
            raise OSError(err, os.strerror(err))
        n = real(fd, bytes(data[: state["left"]]))
        state["left"] -= n
        return n

    monkeypatch.setattr(os, "write", write)


@pytest.mark.parametrize("after", [0, 1, 17, 100])
def test_failed_append_is_cut_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: int) -> None:
    path = tmp_path / "inbox.jsonl"
    j = journal.Journal(path)
    j.append({"type": "message", "body": "one"})
    kept = path.read_bytes()
    _failing_write(monkeypatch, after)
    with pytest.raises(StoreFailed) as err:
        j.append({"type": "message", "body": "two " * 50})
    assert str(err.value) == f"cannot append to {path}: No space left on device; nothing was stored"
    monkeypatch.undo()
    assert path.read_bytes() == kept
    assert [rec["body"] for _, rec in j.scan()] == ["one"]


def test_failed_append_after_a_torn_tail_restores_the_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "inbox.jsonl"
    path.write_bytes(records.encode(records.seal({"type": "x"}, seq=1, prev="", prev_ts=None)) + b'{"half')
    kept = path.read_bytes()
    _failing_write(monkeypatch, 5, errno.EIO)
    with pytest.raises(OSError):
        fsio.append(path, b"new record\n")
    monkeypatch.undo()
    assert path.read_bytes() == kept


def test_failed_fsync_is_cut_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "inbox.jsonl"
    path.write_bytes(b"old\n")
    real = os.fsync
    calls = {"n": 0}

    def fsync(fd: int) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError):
        fsio.append(path, b"new\n")
    monkeypatch.undo()
    assert path.read_bytes() == b"old\n"



def test_meanwhile_runs_after_the_write_and_before_the_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The send's overlap: the data is in the file, write-back was asked for, and the fsync has not run yet."""
    path = tmp_path / "inbox.jsonl"
    path.write_bytes(b"old\n")
    events: list[object] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real(fd))[1])
    monkeypatch.setattr(fsio, "_FADVISE", lambda fd, off, n, advice: events.append(("hint", off, n, advice)))
    at = fsio.append(path, b"new record\n", meanwhile=lambda: events.append(path.read_bytes()))
    assert at == 4
    assert events == [("hint", 4, 10, os.POSIX_FADV_DONTNEED), b"old\nnew record\n", "fsync"]
    events.clear()  # not durable: meanwhile still runs, with no hint and no fsync
    fsio.append(path, b"more\n", durable=False, meanwhile=lambda: events.append("meanwhile"))
    assert events == ["meanwhile"]



def test_writeback_hint_after_a_torn_tail_still_stops_short_of_the_end(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A torn last line gets its newline first: the hint covers that byte too, and still ends before the end."""
    path = tmp_path / "inbox.jsonl"
    path.write_bytes(b'{"half')
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(fsio, "_FADVISE", lambda fd, off, n, advice: calls.append((off, n)))
    fsio.append(path, b"new record\n", meanwhile=lambda: None)
    assert path.read_bytes() == b'{"half\nnew record\n'
    assert calls == [(6, 11)]  # from the terminating newline to one byte short of the file's last byte

def test_meanwhile_that_raises_cuts_the_data_back(tmp_path: Path) -> None:
    path = tmp_path / "inbox.jsonl"
    path.write_bytes(b"old\n")

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fsio.append(path, b"new\n", meanwhile=interrupted)
    assert path.read_bytes() == b"old\n"


@pytest.mark.parametrize(("offset", "length"), [(0, 600), (4000, 600), (4095, 2), (8191, 4095), (123, 4000)])
def test_writeback_hint_covers_no_whole_page_and_stops_short_of_the_end(offset: int, length: int,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Linux drops whole clean pages in a DONTNEED range, and the page at the end of the file even when partial:
    the hint must leave the record's own pages cached (the next append reads the last byte back)."""
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(fsio, "_FADVISE", lambda fd, off, n, advice: calls.append((off, n)))
    fsio.start_writeback(7, offset, length)
    ((off, n),) = calls
    assert off == offset and n == length - 1  # one byte short: the range never ends at the end of the file
    first_whole = -(-off // fsio._PAGE) * fsio._PAGE
    assert first_whole + fsio._PAGE > off + n  # no page lies wholly inside [off, off + n)


@pytest.mark.parametrize("length", [0, 1, 4096, 70000])
def test_writeback_hint_leaves_long_and_empty_writes_to_the_fsync(length: int, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(fsio, "_FADVISE", lambda fd, off, n, advice: calls.append(n))
    fsio.start_writeback(7, 0, length)
    assert calls == []


def test_writeback_hint_that_fails_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(fd: int, off: int, n: int, advice: int) -> None:
        raise OSError(errno.ESPIPE, "Illegal seek")

    monkeypatch.setattr(fsio, "_FADVISE", refused)
    path = tmp_path / "inbox.jsonl"
    fsio.append(path, b"first\n")
    assert fsio.append(path, b"second\n", meanwhile=lambda: None) == 6
    assert path.read_bytes() == b"first\nsecond\n"


def test_a_send_interrupted_while_its_record_is_written_back_stores_nothing(store, collab, monkeypatch) -> None:
    """Ctrl-C between the record's write and its fsync (the transcript section is rendered then): nothing
    stored, no view of it, and the next send takes its place; verify is clean."""
    from agentmsg.backends.file import transcripts
    from agentmsg.domain.values import Draft

    def draft(body: str) -> Draft:
        return Draft(to="reviewer", kind="update", priority="normal", subject="s", body=body)

    store.send(collab.id, collab.driver, draft("the first one"))
    cdir = collab.root / "collabs" / collab.id
    inbox, md = cdir / "inbox" / "reviewer.jsonl", cdir / "collaboration.md"
    kept, kept_md = inbox.read_bytes(), md.read_bytes()
    fsyncs: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real(fd))[1])

    def interrupted(msg: object) -> bytes:
        assert inbox.read_bytes() != kept and not fsyncs  # written, not yet synced
        raise KeyboardInterrupt

    monkeypatch.setattr(transcripts, "message_section", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.send(collab.id, collab.driver, draft("never stored"))
    monkeypatch.undo()
    assert inbox.read_bytes() == kept and md.read_bytes() == kept_md
    (sent,) = store.send(collab.id, collab.driver, draft("after the interruption"))
    assert sent.message.seq == 2
    _code, findings = store.verify(None)
    assert findings == [], findings

def _limited(limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_send_hitting_the_file_size_limit_stores_nothing(collab) -> None:
    """A real process whose writes fail midway (RLIMIT_FSIZE): exit 8, and the inbox is byte-for-byte unchanged."""
    inbox = collab.dir / "inbox" / "reviewer.jsonl"
    _send(collab.root, collab.id, "first")
    kept = inbox.read_bytes()
    body = "x" * 30000
    env = clean_env(collab.root)
    argv = [sys.executable, "-m", "agentmsg.cli", "send", "--collab", collab.id, "--self", DRIVER_PIN, "--to",
            "reviewer", "--subject", "s", "--body", body]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False,
                          preexec_fn=lambda: _limited(len(kept) + 4096))
    assert done.returncode == 8, done.stderr
    assert done.stderr == f"store failed: cannot append to {inbox}: File too large; nothing was stored\n"
    assert inbox.read_bytes() == kept
    code, doc, _err = run_json("inbox", "--collab", collab.id, "--self", REVIEWER_PIN, root=collab.root)
    assert code == 0 and [m["body"] for m in doc["result"]["messages"]] == ["first"]


def test_a_send_whose_fsync_fails_stores_nothing_and_leaves_no_view_of_it(store, collab, monkeypatch) -> None:
    """No transcript shows it, and the id index forgets the offset it reserved, which the next record takes."""
    from agentmsg.domain.values import Draft

    store.send(collab.id, collab.driver, Draft(to="reviewer", kind="update", priority="normal", subject="s",
                                               body="the first one"))
    cdir = collab.root / "collabs" / collab.id
    inbox, md = cdir / "inbox" / "reviewer.jsonl", cdir / "collaboration.md"
    kept = inbox.read_bytes()
    real = os.fsync

    def fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(StoreFailed, match="Input/output error; nothing was stored"):
        store.send(collab.id, collab.driver, Draft(to="reviewer", kind="update", priority="normal", subject="s",
                                                   body="never stored"))
    monkeypatch.setattr(os, "fsync", real)
    assert inbox.read_bytes() == kept
    assert "never stored" not in md.read_text() and "the first one" in md.read_text()
    assert "never stored" not in (cdir / "transcripts" / "reviewer.md").read_text()
    (sent,) = store.send(collab.id, collab.driver, Draft(to="reviewer", kind="update", priority="normal",
                                                         subject="s", body="after the failure"))
    assert sent.message.seq == 2
    _code, findings = store.verify(None)
    assert findings == [], findings
