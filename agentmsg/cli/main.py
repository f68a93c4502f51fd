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

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentmsg.errors import AgentmsgError


def _portalocker_nb(fh: object) -> None:
    # Where there is no flock (not POSIX).  On POSIX portalocker *is* fcntl.flock,
    # so the CLI keeps fsio's own flock there, as the hooks do: importing
    # portalocker costs ~20 ms (importlib.metadata) per command (docs/BENCHMARKS.md).
    import portalocker

    portalocker.lock(fh, portalocker.LOCK_EX | portalocker.LOCK_NB)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``agentmsg ARGV`` in this process; the exit code."""
    import typer

    from agentmsg import fsio
    from agentmsg.cli import output
    from agentmsg.cli.app import app_command, one_command
    from agentmsg.errors import AgentmsgError, UsageError
    from agentmsg.service.oserrors import one_line as _one_line
    from agentmsg.service.oserrors import os_error

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


def _crash(exc: BaseException, command: str = "", args: Sequence[str] = ()) -> AgentmsgError:
    """Write the traceback to a crash log; the user gets one line pointing at it.

    The log is private (0600 in a 0700 folder; links and non-regular files are
    refused) and records the command and option names only: argument values
    hold message bodies, subjects and notes.
    """
    from agentmsg import TOOL
    from agentmsg.errors import AgentmsgError
    from agentmsg.service.oserrors import one_line as _one_line

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
    import stat

    from agentmsg import fsio
    from agentmsg.errors import UnsafePath

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
    """The ``agentmsg`` command (console script, ``python -m agentmsg.cli``): the root's helper runs it when it
    serves the command line (:mod:`agentmsg.cli.thin`), else this process does, and then starts that helper in
    the background for the next command (:func:`agentmsg.cli.thin.ensure`)."""
    from agentmsg.cli import thin

    args = sys.argv[1:]
    if os.environ.pop(thin.TRIED, None) is None:  # the plugin launcher's client tried already
        code = thin.forward(args)
        if code is not None:
            thin.finish(code)
    code = main()
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    try:
        thin.ensure(args)
    except Exception:  # only ever for the next command: never this one's outcome
        pass
    raise SystemExit(code)


def _traceback(exc: BaseException) -> list[str]:
    """Imported only on a crash: every command would otherwise pay for ``traceback``."""
    import traceback

    return traceback.format_exception(type(exc), exc, exc.__traceback__)
