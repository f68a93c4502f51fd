"""The ``agentmsg`` command: argument parsing and the one place errors become lines.

``main`` never lets a traceback reach the user.  Known errors print one line
on stderr and exit with their own code; anything unexpected writes a crash
log under the state root and exits 1.  ``AGENTMSG_RAISE_ERRORS=1`` re-raises
for debugging, as llm's ``LLM_RAISE_ERRORS`` does.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence

import typer

from .. import TOOL, fsio
from ..errors import AgentmsgError, UsageError
from . import output


def _portalocker_nb(fh: object) -> None:
    # Imported on first lock only: it costs ~45 ms (importlib.metadata), which
    # read-only commands (inbox, show, status) should not pay.
    import portalocker

    portalocker.lock(fh, portalocker.LOCK_EX | portalocker.LOCK_NB)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    from .app import app_command

    args = list(sys.argv[1:] if argv is None else argv)
    fsio.lock_nonblocking = _portalocker_nb
    fsio.wait_notice = fsio.warn
    command = output.command_name(args)
    as_json = "--json" in args
    try:
        rv = app_command().main(args=args, prog_name="agentmsg", standalone_mode=False)
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
    except Exception as exc:
        if os.environ.get("AGENTMSG_RAISE_ERRORS"):
            raise
        return output.fail(command, _crash(exc), as_json)


def _closed_pipe() -> int:
    """The reader went away (``agentmsg inbox | head``): exit quietly, as a Unix tool does."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
    return 141


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _crash(exc: BaseException) -> AgentmsgError:
    """Write the traceback to a crash log; the user gets one line pointing at it."""
    path = os.path.join(os.path.expanduser("~"), ".cache", "agentmsg", "crash.log")
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"--- {TOOL} python {sys.version.split()[0]} argv={sys.argv!r}\n")
            fh.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        where = f" (details in {path})"
    except OSError:
        where = ""
    err = AgentmsgError(f"internal error: {type(exc).__name__}: {_one_line(str(exc))[:200]}{where}")
    return err


def run() -> None:
    raise SystemExit(main())
