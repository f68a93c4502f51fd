"""Trust, round three, class 2: no write outside the state root goes through a planted link.

agentmsg writes into projects and host configuration (Cursor's ``.cursor/*.json``, OpenCode's plugin and
skill, Codex's ``hooks.json`` and skill, ``log render --out``, Claude Code's ``CLAUDE_ENV_FILE``, the hooks'
interpreter cache, the wheel's plugin copy).  A project may be someone else's clone, and git stores symlinks.
Each case plants a link (or a hard link, or a FIFO) at the target, at a folder below the base the tool
creates, or at a predictable temporary name, runs the real entry point as a subprocess, and checks that the
file the link points to is unchanged, and the exit code and the one stderr line.

The last test scans the package so that a new raw write call site cannot slip in beside ``fsio.write_outside``.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentmsg import fsio
from tests.support.cli_helpers import REPO_ROOT, clean_env, run, snapshot
from tests.support.helpers_hooks import REVIEWER_SESSION, run_hook

LINK = "is a symlink; refusing to write through it (remove it or put a regular file there, then run this again)"
VICTIM = b'{"victim": "the user\'s own file"}\n'


def _victim(tmp: Path) -> Path:
    """A file outside every target, which a link will point to."""
    outside = tmp / "outside"
    outside.mkdir(exist_ok=True)
    path = outside / "victim.json"
    path.write_bytes(VICTIM)
    return path


def _refused(code: int, err: str, path: Path, what: str = LINK) -> None:
    assert (code, err) == (12, f"unsafe path: {path} {what}\n")


def _env(tmp: Path) -> dict[str, str | None]:
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(tmp / "config"), "CODEX_HOME": str(tmp / "codex"),
            "COPILOT_HOME": None, "XDG_DATA_HOME": str(tmp / "data"), "XDG_CACHE_HOME": str(tmp / "cache")}


def _cursor(project: Path, *, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "agentmsg.hosts.cursor", "install", "--self", "cursor:proj",
                           "--project", str(project)], capture_output=True, text=True, timeout=60,
                          env=clean_env(None, env), check=False)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


# ---- Cursor: .cursor/hooks.json and .cursor/mcp.json ---------------------------------------------------------


@pytest.mark.parametrize("name", ["hooks.json", "mcp.json"])
def test_cursor_refuses_a_link_at_either_file_and_writes_neither(tmp_path: Path, name: str) -> None:
    victim, project = _victim(tmp_path), tmp_path / "proj"
    (project / ".cursor").mkdir(parents=True)
    (project / ".cursor" / name).symlink_to(victim)
    code, out, err = _cursor(project)
    _refused(code, err, project / ".cursor" / name)
    assert out == "" and victim.read_bytes() == VICTIM
    assert sorted(p.name for p in (project / ".cursor").iterdir()) == [name]  # the other file was not written


def test_cursor_refuses_a_linked_cursor_folder(tmp_path: Path) -> None:
    victim, project = _victim(tmp_path), tmp_path / "proj"
    project.mkdir()
    (project / ".cursor").symlink_to(victim.parent, target_is_directory=True)
    before = snapshot(victim.parent)
    code, _out, err = _cursor(project)
    _refused(code, err, project / ".cursor")
    assert snapshot(victim.parent) == before


@pytest.mark.parametrize("kind", ["fifo", "file"])
def test_cursor_refuses_a_cursor_folder_that_is_not_a_directory(tmp_path: Path, kind: str) -> None:
    """A FIFO there is refused without blocking; a file there is named, not a traceback."""
    project = tmp_path / "proj"
    project.mkdir()
    if kind == "fifo":
        os.mkfifo(project / ".cursor")
    else:
        (project / ".cursor").write_bytes(VICTIM)
    code, _out, err = _cursor(project)
    _refused(code, err, project / ".cursor", "is not a directory")


@pytest.mark.parametrize("name", ["hooks.json", "mcp.json"])
def test_cursor_never_writes_through_a_link_at_the_old_temporary_name(tmp_path: Path, name: str) -> None:
    """The temporary file was ``mcp.json.tmp``, opened for writing with links followed."""
    victim, project = _victim(tmp_path), tmp_path / "proj"
    (project / ".cursor").mkdir(parents=True)
    (project / ".cursor" / f"{name}.tmp").symlink_to(victim)
    code, out, _err = _cursor(project)
    assert code == 0 and len(out.splitlines()) == 2
    assert victim.read_bytes() == VICTIM
    assert json.loads((project / ".cursor" / name).read_text())  # a regular file of its own
    assert not (project / ".cursor" / name).is_symlink()


@pytest.mark.parametrize("kind", ["hardlink", "fifo"])
def test_cursor_refuses_a_hard_link_or_a_fifo_at_a_target(tmp_path: Path, kind: str) -> None:
    victim, project = _victim(tmp_path), tmp_path / "proj"
    (project / ".cursor").mkdir(parents=True)
    target = project / ".cursor" / "mcp.json"
    if kind == "hardlink":
        os.link(victim, target)
        what = "has 2 hard links; refusing to write through it"
    else:
        os.mkfifo(target)
        what = fsio._NOT_REGULAR
    code, _out, err = _cursor(project)
    _refused(code, err, target, what)
    assert victim.read_bytes() == VICTIM


def test_cursor_bad_pin_is_one_usage_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "agentmsg.hosts.cursor", "install", "--self", "codex:x",
                           "--project", str(tmp_path)], capture_output=True, text=True, timeout=60,
                          env=clean_env(), check=False)
    assert (done.returncode, done.stderr) == (2, "usage: the pin must be cursor:NAME, not 'codex:x'\n")
    assert not (tmp_path / ".cursor").exists()


# ---- OpenCode: the plugin and the skill (user configuration, or --project) -----------------------------------


OPENCODE_USER = {"plugin": "opencode/plugins/agentmsg.js", "skill": "opencode/skills/agentmsg/SKILL.md"}
OPENCODE_PROJECT = {"plugin": ".opencode/plugins/agentmsg.js", "skill": ".agents/skills/agentmsg/SKILL.md"}


def _opencode(tmp: Path, project: Path | None) -> tuple[Path, tuple[int, str, str]]:
    """``(where the relative paths start, the run)``."""
    args = ("install", "opencode", *(("--project", str(project)) if project else ()))
    return (project or tmp / "config"), run(*args, env=_env(tmp))


@pytest.mark.parametrize("scope", ["user", "project"])
@pytest.mark.parametrize("which", ["plugin", "skill"])
def test_opencode_refuses_a_link_at_either_file_and_writes_neither(tmp_path: Path, scope: str, which: str) -> None:
    victim = _victim(tmp_path)
    project = tmp_path / "proj" if scope == "project" else None
    rels = OPENCODE_PROJECT if project else OPENCODE_USER
    base = project or tmp_path / "config"
    target = base / rels[which]
    target.parent.mkdir(parents=True)
    target.symlink_to(victim)
    from agentmsg.hosts import opencode_files

    mark = opencode_files.MARK if which == "plugin" else opencode_files.SKILL_MARK
    victim.write_bytes(f"// {mark}\n".encode() + VICTIM)  # marked as ours: only the link stops the write
    marked = victim.read_bytes()
    _base, (code, _out, err) = _opencode(tmp_path, project)
    _refused(code, err, target)
    assert victim.read_bytes() == marked
    other = base / rels["skill" if which == "plugin" else "plugin"]
    assert not other.exists()  # checked before either was written


@pytest.mark.parametrize("scope", ["user", "project"])
@pytest.mark.parametrize("folder", [0, 1, 2])
def test_opencode_refuses_a_linked_folder_it_creates(tmp_path: Path, scope: str, folder: int) -> None:
    victim = _victim(tmp_path)
    project = tmp_path / "proj" if scope == "project" else None
    rels = OPENCODE_PROJECT if project else OPENCODE_USER
    base = project or tmp_path / "config"
    # a folder below the base: the project's .opencode / .agents/skills / .agents/skills/agentmsg, or
    # OpenCode's plugins / skills / skills/agentmsg
    parts = {0: rels["plugin"].split("/")[:-1], 1: rels["skill"].split("/")[:-2],
             2: rels["skill"].split("/")[:-1]}[folder]
    if scope == "user":
        parts = parts[1:]  # below $XDG_CONFIG_HOME/opencode, the folder the user names
        base = base / "opencode"
    link = base.joinpath(*parts)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim.parent, target_is_directory=True)
    before = snapshot(victim.parent)
    _base, (code, _out, err) = _opencode(tmp_path, project)
    assert code == 12 and err.startswith(f"unsafe path: {base / parts[0]}") and err.endswith(f"{LINK}\n")
    assert snapshot(victim.parent) == before


def test_opencode_project_install_writes_regular_files(tmp_path: Path) -> None:
    """The control: nothing planted, both files written, and again unchanged."""
    project = tmp_path / "proj"
    project.mkdir()
    for state in ("written", "unchanged"):
        code, out, _err = run("install", "opencode", "--project", str(project), "--json", env=_env(tmp_path))
        doc = json.loads(out)["result"]
        assert code == 0 and (doc["plugin"], doc["skill"]) == (state, state)
    assert (project / OPENCODE_PROJECT["plugin"]).is_file()


# ---- Codex: $CODEX_HOME/hooks.json and ~/.agents/skills/agentmsg/SKILL.md ----------------------------------


def test_codex_install_refuses_a_linked_hooks_file(tmp_path: Path) -> None:
    victim, codex = _victim(tmp_path), tmp_path / "codex"
    victim.write_text('{"hooks": {}}\n')
    codex.mkdir()
    (codex / "hooks.json").symlink_to(victim)
    code, _out, err = run("install", "codex", env=_env(tmp_path))
    _refused(code, err, codex / "hooks.json")
    assert victim.read_text() == '{"hooks": {}}\n'
    assert not (tmp_path / "home" / ".agents").exists()  # the skill was not written either


@pytest.mark.parametrize("at", [".agents", ".agents/skills", ".agents/skills/agentmsg"])
def test_codex_install_refuses_a_linked_skill_folder(tmp_path: Path, at: str) -> None:
    victim, home = _victim(tmp_path), tmp_path / "home"
    home.mkdir()
    link = home / at
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim.parent, target_is_directory=True)
    before = snapshot(victim.parent)
    code, _out, err = run("install", "codex", env=_env(tmp_path))
    _refused(code, err, link)
    assert snapshot(victim.parent) == before
    assert not (tmp_path / "codex" / "hooks.json").exists()


def test_codex_install_refuses_a_linked_skill_file(tmp_path: Path) -> None:
    victim, home = _victim(tmp_path), tmp_path / "home"
    skill = home / ".agents" / "skills" / "agentmsg" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    from agentmsg.hosts.install import SKILL_MARK

    victim.write_text(f"old\n{SKILL_MARK}\n")  # marked as ours, so it would be rewritten
    skill.symlink_to(victim)
    code, _out, err = run("install", "codex", env=_env(tmp_path))
    _refused(code, err, skill)
    assert victim.read_text() == f"old\n{SKILL_MARK}\n"


def test_codex_uninstall_refuses_to_rewrite_a_linked_hooks_file(tmp_path: Path) -> None:
    """Uninstall rewrites hooks.json without our entries; the user's other hooks keep it from being deleted."""
    env = _env(tmp_path)
    assert run("install", "codex", env=env).code == 0
    codex = tmp_path / "codex"
    doc = json.loads((codex / "hooks.json").read_text())
    doc["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "echo mine"}]})
    victim = _victim(tmp_path)
    victim.write_text(json.dumps(doc))
    (codex / "hooks.json").unlink()
    (codex / "hooks.json").symlink_to(victim)
    before = victim.read_bytes()
    code, _out, err = run("uninstall", "codex", "--keep-plugin", env=env, root=tmp_path / "state")
    _refused(code, err, codex / "hooks.json")
    assert victim.read_bytes() == before


# ---- log render --out, CLAUDE_ENV_FILE, hooks/run's interpreter cache -----------------------------------


def test_log_render_out_refuses_a_link(tmp_path: Path, collab: Any) -> None:
    victim = _victim(tmp_path)
    out = tmp_path / "page.html"
    out.symlink_to(victim)
    code, _out, err = run("log", "render", "--collab", collab.id, "--out", str(out), root=collab.root)
    _refused(code, err, out)
    assert victim.read_bytes() == VICTIM and out.is_symlink()


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_session_start_never_appends_through_a_planted_env_file(tmp_path: Path, collab: Any, kind: str) -> None:
    victim = _victim(tmp_path)
    env_file = tmp_path / "claude-env"
    if kind == "symlink":
        env_file.symlink_to(victim)
    else:
        os.link(victim, env_file)
    res = run_hook("claude", "SessionStart", tmp_path, collab.root, REVIEWER_SESSION,
                   extra_env={"CLAUDE_ENV_FILE": str(env_file)})
    assert victim.read_bytes() == VICTIM
    assert res.returncode == 0 and "reviewer" in res.text  # the rest of SessionStart still ran


def test_hook_interpreter_cache_never_writes_through_its_temporary_name(tmp_path: Path) -> None:
    """``hooks/run`` caches the interpreter it found as ``python3-path.$$`` then renames it: the name is
    predictable from the pid, which ``exec`` keeps, so the link is planted by the process that becomes the hook."""
    victim, data = _victim(tmp_path), tmp_path / "plugin-data"
    data.mkdir()
    env = {"HOME": str(tmp_path / "home"), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
           "CLAUDE_PLUGIN_DATA": str(data), "AGENTMSG_HOME": str(tmp_path / "state"), "LANG": "C.UTF-8"}
    script = 'ln -s "$1" "$2/python3-path.$$" && exec /bin/sh "$3" claude'
    done = subprocess.run(["/bin/sh", "-c", script, "sh", str(victim), str(data), str(REPO_ROOT / "hooks" / "run")],
                          input=b"{}", capture_output=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert victim.read_bytes() == VICTIM


# ---- bin/agentmsg: the launcher's private folder ---------------------------------------------------------------


def _launcher(tmp: Path, args: list[str], plant: str, *, python: Path | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``bin/agentmsg ARGS`` with ``XDG_DATA_HOME=tmp/data``; ``plant`` runs first in the process that becomes
    the launcher (``exec`` keeps its pid, so ``$$`` names the launcher's temporary names)."""
    bindir = python.parent if python else Path(sys.executable).parent
    full = {"HOME": str(tmp / "home"), "XDG_DATA_HOME": str(tmp / "data"), "PATH": f"{bindir}:/usr/bin:/bin",
            **(env or {})}
    (tmp / "data" / "agentmsg").mkdir(parents=True, exist_ok=True)
    script = f'D="$1/agentmsg"; V="$2"; L="$3"; shift 3; {plant}; exec /bin/sh "$L" "$@"'
    return subprocess.run(["/bin/sh", "-c", script, "sh", str(tmp / "data"), str(_victim(tmp)),
                           str(REPO_ROOT / "bin" / "agentmsg"), *args], capture_output=True, text=True,
                          env=full, timeout=300, stdin=subprocess.DEVNULL, check=False)


def test_launcher_marker_never_truncates_a_linked_file(tmp_path: Path) -> None:
    """``--prepare-env`` with a python3 that has the dependencies leaves a marker file: not through a link."""
    done = _launcher(tmp_path, ["--prepare-env"], 'ln -s "$V" "$D/python3-has-deps"')
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "outside" / "victim.json").read_bytes() == VICTIM


def test_launcher_build_never_writes_through_its_log_or_temporary_venv(tmp_path: Path) -> None:
    """A first run without the dependencies, offline: the log and ``venv.tmp.$$`` were links when it started."""
    fake = tmp_path / "bin" / "python3"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')  # no site-packages: no typer
    fake.chmod(0o755)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    plant = f'ln -s "$V" "$D/venv-install.log"; ln -s "{elsewhere}" "$D/venv.tmp.$$"'
    done = _launcher(tmp_path, ["status"], plant, python=fake,
                     env={"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0", "PIP_TIMEOUT": "1",
                          "PIP_NO_CACHE_DIR": "1"})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("agentmsg: could not install typer")
    assert (tmp_path / "outside" / "victim.json").read_bytes() == VICTIM
    assert list(elsewhere.iterdir()) == []  # no venv built in the linked folder


def test_launcher_mcp_step_never_appends_through_a_linked_log(tmp_path: Path) -> None:
    venv = tmp_path / "data" / "agentmsg" / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (venv / ".agentmsg-ready").touch()
    done = _launcher(tmp_path, ["mcp"], 'ln -s "$V" "$D/venv-install.log"', env={"PIP_NO_INDEX": "1"})
    assert done.returncode == 2 and "could not install mcp" in done.stderr
    assert (tmp_path / "outside" / "victim.json").read_bytes() == VICTIM


# ---- the wheel's plugin copy ---------------------------------------------------------------------------------


def test_wheel_build_never_copies_through_a_link_in_the_build_folder(tmp_path: Path) -> None:
    victim, build = _victim(tmp_path), tmp_path / "build"
    planted = build / "agentmsg" / "_plugin" / "hooks" / "run"
    planted.parent.mkdir(parents=True)
    planted.symlink_to(victim)
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(build)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert victim.read_bytes() == VICTIM
    assert not planted.is_symlink() and planted.read_bytes() == (REPO_ROOT / "hooks" / "run").read_bytes()


# ---- fsio.write_outside itself ---------------------------------------------------------------------------------


def test_write_outside_never_opens_a_link_at_its_temporary_name(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Random in practice; with the name known in advance, ``O_EXCL|O_NOFOLLOW`` still refuses the link."""
    victim = _victim(tmp_path)
    monkeypatch.setattr(os, "urandom", lambda n: b"\0" * n)
    (tmp_path / f".f.json.{os.getpid()}.{'00' * 8}.tmp").symlink_to(victim)
    with pytest.raises(FileExistsError):
        fsio.write_outside(tmp_path, "f.json", b"new")
    assert victim.read_bytes() == VICTIM and not (tmp_path / "f.json").exists()


def test_write_outside_is_private_keeps_a_mode_and_refuses_dotted_paths(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b.json"
    assert fsio.write_outside(tmp_path, "a/b.json", b"1") == str(target)
    assert target.stat().st_mode & 0o777 == 0o600  # private unless the file was there with its own mode
    target.chmod(0o640)
    fsio.write_outside(tmp_path, "a/b.json", b"2")
    assert target.read_bytes() == b"2" and target.stat().st_mode & 0o777 == 0o640
    for rel in ("../x", "a/../x", "/x", "a//x", "a/"):
        with pytest.raises(ValueError):
            fsio.write_outside(tmp_path, rel, b"x")


# ---- no raw write call site slips in ---------------------------------------------------------------------------

PKG = REPO_ROOT / "agentmsg"
#: Whole modules whose every write is inside the state root, through fsio's rules.
STATE_ROOT_MODULES = ("agentmsg/fsio.py", "agentmsg/backends/file/", "agentmsg/runtime/", "agentmsg/resident/")
#: Other call sites, each with why it is not a write outside the state root through a path it does not own.
ALLOWED: dict[tuple[str, str], str] = {
    ("agentmsg/backends/url.py", "open_store"): "os.makedirs: a file:/// store's own root",
    ("agentmsg/cli/main.py", "_closed_pipe"): "os.open: /dev/null",
    ("agentmsg/cli/main.py", "_private_append"): "os.makedirs: the crash log's folder, lstat-checked; the log "
                                                 "is opened by fsio._open (no link, FIFO or hard link)",
    ("agentmsg/hooks/base.py", "HookBase.log"): "hooks.log in the state root",
    ("agentmsg/hooks/base.py", "HookBase.save_state"): "hook state in the state root",
    ("agentmsg/hooks/pretool.py", "log_failing_open"): "fsio.append: hooks.log in the state root (the pre-tool "
                                                        "and the edit hooks)",
    ("agentmsg/hooks/claimnews.py", "mark_told"): "fsio.atomic_write: the session's edits/<pin key>.told in the "
                                                  "state root (what claims news it was told)",
    ("agentmsg/hooks/edited.py", "_mark_solo"): "fsio.atomic_write: the session's idle/<runtime>/<id>.solo marker "
                                                "in the state root",
    ("agentmsg/service/guard.py", "_log"): "fsio.append: hooks.log in the state root (AGENTMSG_GUARD=off)",
    ("agentmsg/hooks/waiter.py", "Waiter.run"): "the waiter's token, a session file in the state root",
    ("agentmsg/hosts/claude.py", "Claude.session_started"): "fsio.append_entries: CLAUDE_ENV_FILE, refusing a "
                                                            "link, a FIFO and a hard link",
    ("agentmsg/hosts/claude.py", "_leave_ring"): "a session file in the state root",
}
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
_ANY_BASE = {"write_text", "write_bytes", "symlink_to", "hardlink_to", "touch", "mkdir", "makedirs"}
_BASES = {"os": {"replace", "rename", "renames", "link", "symlink", "truncate", "mkfifo", "fdopen"},
          "shutil": {"copy", "copy2", "copyfile", "copytree", "copyfileobj", "move"},
          "fsio": {"atomic_write", "overwrite", "overwrite_or_replace", "append", "append_entries", "append_raw",
                   "open_overwrite", "open_append", "_open", "_open_stat"}}


def _writes_mode(call: ast.Call, at: int) -> bool:
    mode = call.args[at] if len(call.args) > at else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return mode is not None and not (isinstance(mode, ast.Constant) and not set(str(mode.value)) & set("wax+"))


def _path_open_writes(call: ast.Call) -> bool:
    """``something.open(MODE)`` as ``Path.open`` takes it: a mode that writes, given as a string (first argument)
    or as ``mode=``; another object's ``open(...)`` (``Mailbox.open(who, alias, ..., policy=...)``) is not one."""
    mode = next((k.value for k in call.keywords if k.arg == "mode"), None)
    if mode is None and call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        mode = call.args[0]
    if mode is None:
        return False
    return not (isinstance(mode, ast.Constant) and not set(str(mode.value)) & set("wax+"))


def _raw_write(call: ast.Call) -> str | None:
    """What raw write ``call`` is, if it is one (``fsio.write_outside`` is not)."""
    fn = call.func
    if isinstance(fn, ast.Name) and fn.id == "open" and _writes_mode(call, 1):
        return "open() for writing"
    if not isinstance(fn, ast.Attribute):
        return None
    base = ast.unparse(fn.value)
    if base == "os" and fn.attr == "open":
        flags = {n.attr for n in ast.walk(call.args[1]) if isinstance(n, ast.Attribute)} if call.args[1:] else set()
        return "os.open() for writing" if flags & _WRITE_FLAGS else None
    if fn.attr == "open" and _path_open_writes(call):
        return f"{base}.open() for writing"
    if fn.attr in _ANY_BASE or fn.attr in _BASES.get(base, ()):
        return f"{base}.{fn.attr}()"
    return None


def _scan(path: Path) -> list[tuple[str, str]]:
    """``(enclosing function, what)`` for each raw write call in the module."""
    found: list[tuple[str, str]] = []

    def visit(node: ast.AST, where: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = (*where, child.name) if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                               ast.ClassDef)) else where
            if isinstance(child, ast.Call) and (what := _raw_write(child)):
                found.append((".".join(where), f"line {child.lineno}: {what}"))
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), ())
    return found


def test_no_raw_write_outside_the_allowed_modules() -> None:
    """A write outside the state root goes through fsio.write_outside; anything else is listed above, with why."""
    stray, used = [], set()
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(REPO_ROOT).as_posix()
        if rel.startswith(STATE_ROOT_MODULES):
            continue
        for where, what in _scan(path):
            if (rel, where) in ALLOWED:
                used.add((rel, where))
            else:
                stray.append(f"{rel} {where or '<module>'} {what}")
    assert not stray, ("raw writes outside fsio: use fsio.write_outside for a file outside the state root, or list "
                       "the call site in ALLOWED with why it is safe:\n" + "\n".join(stray))
    assert used == set(ALLOWED), f"ALLOWED lists call sites that are gone: {sorted(set(ALLOWED) - used)}"


def test_the_scan_sees_the_writes_it_forbids(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("import os, shutil\nfrom pathlib import Path\n"
                   "def f(p):\n    open(p, 'w')\n    Path(p).write_text('x')\n    os.replace(p, p)\n"
                   "    shutil.copytree(p, p)\n    os.open(p, os.O_WRONLY | os.O_CREAT)\n    Path(p).mkdir()\n"
                   "    fsio.atomic_write(p, b'')\n    open(p)\n    os.open(p, os.O_RDONLY)\n"
                   "    fsio.write_outside(p, 'x', b'')\n")
    assert [what.split(": ", 1)[1] for _where, what in _scan(src)] == [
        "open() for writing", "Path(p).write_text()", "os.replace()", "shutil.copytree()", "os.open() for writing",
        "Path(p).mkdir()", "fsio.atomic_write()"]
