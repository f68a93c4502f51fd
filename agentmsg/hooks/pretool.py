"""The pre-tool hook (docs/CLAIMS.md): refuse an edit of a path another participant holds exclusively.

``hooks/run HOST pretool`` runs it for a host's ``PreToolUse`` (docs/CLAIMS.md names which) only when
``ROOT/claims.json`` exists and is not empty (otherwise it exits before any interpreter starts).  Here:

1. the tool call's targets: ``Edit``/``Write``/``MultiEdit``'s ``file_path``, ``NotebookEdit``'s
   ``notebook_path``, ``apply_patch``'s patch headers, and the common shell writers of a ``Bash`` command
   (:func:`shell_targets`);
2. the session's collaborations (the pin index) and their live exclusive claims held by someone else;
3. each target's repository (runtime/gitrepo.py, from the files; the index's ``repos`` spares a ``git``
   process) and its path inside it, against each claim's pattern (domain/globs.py's rule).

A hit prints the host's refusal (``permissionDecision: deny``: one line naming the holder, until when, and the
``agentmsg send`` command that asks them, then the holder's pattern and reason inside the untrusted boundary);
anything else prints nothing.  Damaged state fails open, with a line
in ``ROOT/hooks.log``.  Lean: stdlib and agentmsg's lean modules only.
"""

from __future__ import annotations

import posix
import sys
import time

from agentmsg import pathops, records

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: Tools whose input names the one file they write.
FILE_TOOLS = {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path",
              "write_file": "file_path", "replace": "file_path", "edit": "filePath", "write": "filePath"}
SHELL_TOOLS = ("Bash", "shell", "exec_command", "run_shell_command", "bash")
PATCH_TOOLS = ("apply_patch",)
STDIN_MAX = 4 * 1024 * 1024
#: Shell words after which the next words are the files written (or removed, or moved).
_WRITERS = ("rm", "mv", "cp", "tee", "truncate", "touch", "unlink", "shred", "install", "ln", "dd")
_SEPARATORS = (";", "&&", "||", "|", "&", "\n", "(", ")", "{", "}")


def main(host: str, argv: list[str] | None = None) -> int:
    """``hooks/run`` passes ``RUNTIME CLAIMS_INDEX PINS_DIR`` (names from backends/file/layout.py, spelled there by
    scripts/gen_layout.py), so this path imports neither the layout nor the host modules; without them (``python
    -m``), they are looked up."""
    root = ""
    try:
        args = list(sys.argv[3:] if argv is None else argv)
        if len(args) >= 3:
            runtime, index, pins = args[:3]
            root = pathops.dirname(index)
        else:
            root = state_root()
            runtime, index, pins = runtime_of(host), *_files(root)
        raw = sys.stdin.buffer.read(STDIN_MAX + 1)
        line = decide(runtime, raw, index, pins)
        if line:
            from agentmsg.hosts import registry  # only to refuse: each host's own output shape

            posix.write(1, records.dumps_plain(registry.get_or_nothing(host).refusal(line)).encode())
    except BaseException as exc:  # fail open: an edit is never refused because agentmsg's state is damaged
        _log(root, host, exc)
    return 0


def _files(root: str) -> tuple[str, str]:
    from agentmsg.backends.file import layout

    return pathops.join(root, layout.CLAIMS), pathops.join(root, layout.PINS)


def state_root() -> str:
    from agentmsg.paths import resolve_root_str

    return resolve_root_str(None)[0]


def _log(root: str, host: str, exc: BaseException) -> None:
    log_failing_open(root, f"pretool {host[:10]}: claims not checked", exc)


def log_failing_open(root: str, what_failed: str, exc: BaseException) -> None:
    """One line in ``ROOT/hooks.log`` for a tool hook that let the call through because of ``exc``; never
    raises (the pre-tool and the edit hooks)."""
    try:
        if not root or not pathops.isdir(root):
            return
        from agentmsg import fsio
        from agentmsg.backends.file import layout

        why = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:400]
        line = f"{records.now_utc()} {what_failed} (failing open): {why}\n"
        fsio.append(pathops.join(root, layout.HOOKS_LOG), line.encode("utf-8", "backslashreplace"), durable=False)
    except BaseException:  # nowhere left to report to
        pass


class Damaged(ValueError):
    """The claims index or the pin index cannot be read: the hook fails open and says so in hooks.log."""


def read_json(path: str) -> Any:
    """A derived file's JSON: None when absent; Damaged when it is not a plain file or not JSON."""
    try:
        fd = posix.open(path, posix.O_RDONLY | posix.O_NOFOLLOW | posix.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Damaged(f"{path}: {exc}") from None
    try:
        if posix.fstat(fd).st_mode & 0o170000 != 0o100000:
            raise Damaged(f"{path} is not a plain file")
        chunks = []
        while chunk := posix.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        posix.close(fd)
    try:
        return records.loads(b"".join(chunks)) if chunks else None
    except ValueError:
        raise Damaged(f"{path} does not parse") from None


def decide(runtime: str, raw: bytes, index_path: str, pins_dir: str) -> str | None:
    """The refusal line for this tool call, or None to let it run."""
    index = read_json(index_path)
    if index is None:
        return None
    if not isinstance(index, dict) or not isinstance(index.get("claims"), list) or not isinstance(
            index.get("repos"), dict):
        raise Damaged(f"{index_path} is not a claims index")
    if not index["claims"] or len(raw) > STDIN_MAX:
        return None
    data = records.loads(raw)
    if not isinstance(data, dict):
        raise Damaged("the hook's input is not a JSON object")
    pin = f"{runtime}:{data.get('session_id')}"
    now = time.time()
    mine = bindings(pins_dir, pin)
    theirs = [c for c in index["claims"] if isinstance(c, dict) and c.get("collab") in mine
              and c.get("mode") == "exclusive" and c.get("pin") != pin and c.get("alias") != mine[c["collab"]]
              and isinstance(c.get("expires_at"), (int, float)) and now < c["expires_at"]]
    if not theirs:
        return None
    given = data.get("cwd")
    cwd = given if isinstance(given, str) else posix.getcwd()
    for target in targets(str(data.get("tool_name") or ""), data.get("tool_input")):
        hit = held(theirs, index["repos"], cwd, target)
        if hit is not None:
            return refusal(hit, target)
    return None


def runtime_of(host: str) -> str:
    from agentmsg.hosts import registry

    found = registry.get(host)
    return found.runtime if found is not None else host


def bindings(pins_dir: str, pin: str) -> dict[str, str]:
    """The session's collaborations -> its alias there, from the pin index (``pins/<key>.json``)."""
    from agentmsg.paths import pin_key

    doc = read_json(pathops.join(pins_dir, f"{pin_key(pin)}.json"))
    if doc is None:
        return {}
    entries = doc.get("bindings") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise Damaged(f"the pin index of {pin[:60]} is damaged")
    return {e["collab"]: e["alias"] for e in entries
            if isinstance(e, dict) and isinstance(e.get("collab"), str) and isinstance(e.get("alias"), str)}


def held(theirs: list[dict[str, Any]], repos: dict[str, str], cwd: str, target: str) -> dict[str, Any] | None:
    """The claim covering what ``target`` names: the path itself (a link's own name, for ``rm`` or ``mv``) and,
    when it is a symbolic link, the file it leads to (an edit through a link writes that file)."""
    path = pathops.normpath(pathops.join(cwd, target))
    hit = _covering(theirs, repos, path)
    if hit is None and pathops.islink(path):
        hit = _covering(theirs, repos, pathops.realpath(path))
    return hit


def _covering(theirs: list[dict[str, Any]], repos: dict[str, str], path: str) -> dict[str, Any] | None:
    from agentmsg.domain import globs
    from agentmsg.runtime import gitrepo

    folder = path if pathops.isdir(path) else pathops.dirname(path)
    while folder and not pathops.isdir(folder):  # a file (or folder) about to be created
        folder = pathops.dirname(folder)
    repo = gitrepo.identify(folder or "/", repos)
    if repo is None:
        return None
    real = pathops.join(pathops.realpath(pathops.dirname(path)), pathops.basename(path))
    top = pathops.realpath(repo.top)
    if real != top and not real.startswith(top + "/"):
        return None
    rel = real[len(top) + 1:] or "."
    if rel == "." or rel.startswith(".git/"):
        return None
    for c in theirs:
        if c.get("repo") == repo.key and isinstance(c.get("pattern"), str) and globs.covers(c["pattern"], rel):
            return dict(c, rel=rel)
    return None


def refusal(c: dict[str, Any], target: str) -> str:
    """agentmsg's one line (the path the model named, the holder's validated alias and pin, the expiry, the
    command that asks), then the holder's own words (pattern and reason) inside the untrusted boundary."""
    from agentmsg.text import boundary

    until = records.utc_words(float(c["expires_at"]))
    rel, alias, pin = boundary.one_line(str(c["rel"])), str(c["alias"]), str(c["pin"])
    line = (f"agentmsg: {rel} is claimed exclusively by {alias} ({pin}) until {until}; this edit was not made. "
            f"To ask them: agentmsg send --collab {c['collab']} --to {alias} --kind request "
            f"--subject 'may I edit {rel}?' --body '...'")
    fields = [("claim", str(c.get("pattern") or ""))] + ([("reason", str(c["reason"]))] if c.get("reason") else [])
    flags = c.get("flags")
    if not (isinstance(flags, list) and all(isinstance(f, str) for f in flags)):  # an index written before flags
        from agentmsg.text import injection

        flags = injection.detect("\n".join(v for _, v in fields))
    return line + "\n" + boundary.peer_fields(fields, flags, f"{alias} ({pin}), the claim's holder")


# ---- what a tool call writes ----------------------------------------------------------------------------------


#: Other hosts' file-writing tools, by lower-cased name: their input names the file under one of ``_PATH_KEYS``.
_WRITE_TOOLS = frozenset(("edit", "create", "write", "multiedit", "notebookedit", "str_replace_editor",
                          "write_file", "replace", "patch"))
_PATH_KEYS = ("file_path", "filePath", "path", "notebook_path")


def targets(tool: str, given: object) -> list[str]:
    """The paths a tool call would write, move or delete (as given: relative to the session's cwd, or absolute)."""
    args = given if isinstance(given, dict) else {}
    if tool in FILE_TOOLS or tool.lower() in _WRITE_TOOLS:
        keys = (FILE_TOOLS[tool], *_PATH_KEYS) if tool in FILE_TOOLS else _PATH_KEYS
        value = next((args[k] for k in keys if isinstance(args.get(k), str) and args[k]), None)
        return [value] if value else []
    if tool in PATCH_TOOLS or (tool in SHELL_TOOLS and _patch_text(args)):
        return patch_targets(_patch_text(args) or "")
    if tool in SHELL_TOOLS:
        cmd = args.get("command") or args.get("cmd")
        if isinstance(cmd, list):
            cmd = " ".join(str(w) for w in cmd)
        return shell_targets(cmd) if isinstance(cmd, str) else []
    return []


def _patch_text(args: dict[str, Any]) -> str | None:
    for key in ("command", "input", "patch"):
        value = args.get(key)
        if isinstance(value, list):
            value = "\n".join(str(v) for v in value)
        if isinstance(value, str) and "*** Begin Patch" in value:
            return value
    return None


def patch_targets(patch: str) -> list[str]:
    """The ``apply_patch`` format: ``*** Add File:``, ``*** Update File:``, ``*** Delete File:``, ``*** Move to:``."""
    out = []
    for line in patch.splitlines():
        for head in ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "):
            if line.startswith(head) and line[len(head):].strip():
                out.append(line[len(head):].strip())
    return out


def words(cmd: str) -> list[str]:
    """Shell words and operators, with quotes removed (no expansion; ``$(..)`` and the like stay as text)."""
    out: list[str] = []
    cur: list[str] = []
    i, n, quoted = 0, len(cmd), False

    def flush() -> None:
        nonlocal quoted
        if cur or quoted:
            out.append("".join(cur))
        cur.clear()
        quoted = False

    while i < n:
        c = cmd[i]
        if c in " \t":
            flush()
        elif c == "\\" and i + 1 < n:
            cur.append(cmd[i + 1])
            i += 1
        elif c in "'\"":
            end = cmd.find(c, i + 1)
            end = n if end < 0 else end
            cur.append(cmd[i + 1:end])
            quoted = True
            i = end
        elif c in ";|&\n()<>{}":
            op = cmd[i:i + 2] if cmd[i:i + 2] in ("&&", "||", ">>", "&>", ">|") else c
            if c == ">" and cur and "".join(cur).isdigit():  # 2> file: the descriptor is part of the operator
                cur.clear()
            flush()
            out.append(op)
            i += len(op) - 1
        else:
            cur.append(c)
        i += 1
    flush()
    return out


def shell_targets(cmd: str) -> list[str]:
    """Files a shell command would write: redirections (``>``, ``>>``, ``&>``), ``tee``, ``sed -i``, ``rm``,
    ``mv``, ``cp`` (its destination), ``truncate``/``touch``/``dd of=``, ``git checkout -- PATHS``/``git restore``/
    ``git rm``/``git mv``.
    Anything else (an interpreter writing a file, a variable holding a path, ``find -delete``) is not seen:
    docs/CLAIMS.md, "Limits"."""
    toks = words(cmd)
    out: list[str] = []
    simple: list[str] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t in (">", ">>", "&>", ">|"):
            if i + 1 < len(toks) and toks[i + 1] not in _SEPARATORS and not toks[i + 1].startswith("&"):
                out.append(toks[i + 1])
            i += 2
            continue
        if t in ("<",):
            i += 2
            continue
        if t in _SEPARATORS:
            out += _command_targets(simple)
            simple = []
        else:
            simple.append(t)
        i += 1
    out += _command_targets(simple)
    return [p for p in out if p and p not in ("/dev/null", "/dev/stdout", "/dev/stderr", "-")]


def _command_targets(argv: list[str]) -> list[str]:
    while argv and (("=" in argv[0] and not argv[0].startswith("=")) or argv[0] in ("sudo", "command", "env")):
        argv = argv[1:]
    if not argv:
        return []
    name = pathops.basename(argv[0])
    rest = argv[1:]
    plain = [a for a in rest if not a.startswith("-")]
    after = rest[rest.index("--") + 1:] if "--" in rest else None
    if name == "git" and rest[:1] in (["checkout"], ["restore"], ["rm"], ["mv"]):
        if rest[0] != "checkout":  # git restore/rm/mv PATHS: each path named is written, removed or moved
            return [a for a in rest[1:] if not a.startswith("-")]
        return after or []
    if name == "sed":
        if not any(a.startswith("-i") or a.startswith("--in-place") for a in rest):
            return []
        has_script = any(a in ("-e", "-f") or a.startswith("--expression") for a in rest)
        files = [a for j, a in enumerate(rest) if not a.startswith("-") and not (j and rest[j - 1] in ("-e", "-f"))]
        return files if has_script else files[1:]
    if name == "dd":
        return [a[3:] for a in rest if a.startswith("of=")]
    if name in ("cp", "install", "ln"):
        return plain[-1:] if len(plain) >= 2 else []
    if name in _WRITERS:
        return plain + [a for a in (after or []) if a.startswith("-")]
    return []
