"""The ``agentmsg`` command: argument parsing and the one place errors become lines.

``main`` never lets a traceback reach the user.  Known errors print one line
on stderr and exit with their own code; an ``OSError`` the operating system
raised (full disk, read-only file system, a file where a directory should
be, a name too long, ...) becomes the documented code for its class
(``os_error``); anything else writes a crash log (0600, in a 0700 folder,
with the command name and option names only, never their values) and exits 1.  ``AGENTMSG_RAISE_ERRORS=1`` re-raises
for debugging, as llm's ``LLM_RAISE_ERRORS`` does.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Sequence

import typer

from agentmsg import TOOL, fsio
from agentmsg.cli import output
from agentmsg.errors import AgentmsgError, StoreFailed, UnsafePath, UsageError
from agentmsg.text import escape as visible


def _portalocker_nb(fh: object) -> None:
    # Where there is no flock (not POSIX).  On POSIX portalocker *is* fcntl.flock,
    # so the CLI keeps fsio's own flock there, as the hooks do: importing
    # portalocker costs ~20 ms (importlib.metadata) per command (docs/BENCHMARKS.md).
    import portalocker

    portalocker.lock(fh, portalocker.LOCK_EX | portalocker.LOCK_NB)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    from agentmsg.cli.app import app_command, one_command

    args = list(sys.argv[1:] if argv is None else argv)
    args = _take_store(args)
    if os.name != "posix":
        fsio.lock_nonblocking = _portalocker_nb
    fsio.wait_notice = fsio.warn
    command = output.command_name(args)
    as_json = "--json" in args
    try:
        # Only the named command is built (a few ms); the whole tree only for help and unknown commands.
        one = one_command(args)
        cmd, prog, rest = one if one is not None else (app_command(), "agentmsg", args)
        rv = cmd.main(args=rest, prog_name=prog, standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except AgentmsgError as err:
        return output.fail(command, err, as_json)
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        sys.stderr.write("interrupted\n")
        return 130
    except typer.TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `agentmsg` or `agentmsg log`
            sys.stdout.write(exc.format_message() + "\n")
            return 0
        return output.fail(command, UsageError(_one_line(exc.format_message())), as_json)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return _closed_pipe()
    except OSError as exc:
        mapped = os_error(exc)
        if mapped is None:
            if os.environ.get("AGENTMSG_RAISE_ERRORS"):
                raise
            mapped = _crash(exc, command, args)
        return output.fail(command, mapped, as_json)
    except Exception as exc:
        if os.environ.get("AGENTMSG_RAISE_ERRORS"):
            raise
        return output.fail(command, _crash(exc, command, args), as_json)


def _take_store(args: list[str]) -> list[str]:
    """Take the global ``--store URL`` (or ``--store=URL``) out of ``args`` into ``AGENTMSG_STORE``.

    The variable, not a flag per command: every command, and whatever it
    starts (the mirror), then names the same store.
    """
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out += args[i:]
            break
        if arg == "--store" and i + 1 < len(args):
            os.environ["AGENTMSG_STORE"] = args[i + 1]
            i += 2
            continue
        if arg.startswith("--store="):
            os.environ["AGENTMSG_STORE"] = arg.split("=", 1)[1]
        else:
            out.append(arg)
        i += 1
    return out


def _closed_pipe() -> int:
    """The reader went away (``agentmsg inbox | head``): exit quietly, as a Unix tool does."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
    return 141


#: errno -> (error class, what it means); anything not here is an internal error.
OS_ERRORS: dict[int, tuple[type[AgentmsgError], str]] = {
    errno.ENOSPC: (StoreFailed, "no space left on the device"),
    errno.EDQUOT: (StoreFailed, "disk quota exceeded"),
    errno.EIO: (StoreFailed, "input/output error"),
    errno.EROFS: (StoreFailed, "read-only file system"),
    errno.EFBIG: (StoreFailed, "file too large"),
    errno.EACCES: (UnsafePath, "permission denied"),
    errno.EPERM: (UnsafePath, "operation not permitted"),
    errno.ENOTDIR: (UnsafePath, "a component of the path is not a directory"),
    errno.EISDIR: (UnsafePath, "is a directory where a file belongs"),
    errno.ELOOP: (UnsafePath, "too many levels of symbolic links"),
    errno.ENXIO: (UnsafePath, "is not a regular file"),
    errno.ENAMETOOLONG: (UsageError, "file name too long"),
}


def os_error(exc: OSError) -> AgentmsgError | None:
    """The documented error for an operating-system failure, or None (an internal error)."""
    found = OS_ERRORS.get(exc.errno or 0)
    if found is None:
        return None
    cls, what = found
    name = exc.filename if exc.filename is not None else ""
    if exc.errno == errno.ENOTDIR and isinstance(name, str) and name:
        name, what = _not_a_dir(name), "is not a directory"
    where = visible.escape(_one_line(os.fsdecode(name) if isinstance(name, (str, bytes)) else str(name)))
    where = (where[:400] + "...") if len(where) > 400 else where
    tail = "; nothing was stored" if cls is StoreFailed else ""
    sep = " " if what.startswith("is ") else ": "  # "PATH is not a directory", "PATH: read-only file system"
    return cls(f"{where + sep if where else ''}{what}{tail}")


def _not_a_dir(path: str) -> str:
    """The first component of ``path`` that exists and is not a directory (``path`` if none is found)."""
    parts = os.path.normpath(path).split(os.sep)
    for i in range(2, len(parts) + 1):
        head = os.sep.join(parts[:i]) or os.sep
        try:
            if not stat.S_ISDIR(os.lstat(head).st_mode):
                return head
        except OSError:
            break
    return path


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _crash(exc: BaseException, command: str = "", args: Sequence[str] = ()) -> AgentmsgError:
    """Write the traceback to a crash log; the user gets one line pointing at it.

    The log is private (0600 in a 0700 folder; links and non-regular files are
    refused) and records the command and option names only: argument values
    hold message bodies, subjects and notes.
    """
    path = os.path.join(os.path.expanduser("~"), ".cache", "agentmsg", "crash.log")
    options = sorted({a.split("=", 1)[0] for a in args if a.startswith("--")})
    try:
        _private_append(path, f"--- {TOOL} python {sys.version.split()[0]} command={command or '-'} "
                              f"options={' '.join(options) or '-'}\n"
                        + "".join(_traceback(exc)))
        where = f" (details in {path})"
    except (OSError, AgentmsgError):
        where = ""
    err = AgentmsgError(f"internal error: {type(exc).__name__}: {_one_line(str(exc))[:200]}{where}")
    return err


def _private_append(path: str, text: str) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    st = os.lstat(folder)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{folder} is not a directory")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(folder, 0o700)
    fd = fsio._open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600, write=True)
    try:
        os.fchmod(fd, 0o600)
        fsio._write_all(fd, text.encode("utf-8", "backslashreplace"))
    finally:
        os.close(fd)


def run() -> None:
    raise SystemExit(main())


def _traceback(exc: BaseException) -> list[str]:
    """Imported only on a crash: every command would otherwise pay for ``traceback``."""
    import traceback

    return traceback.format_exception(type(exc), exc, exc.__traceback__)
