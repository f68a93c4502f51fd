"""``agentmsg run gemini ...``: start Gemini CLI with a session id its shell can name.

Gemini CLI gives its hooks the session id (``GEMINI_SESSION_ID``) but gives the agent's shell none, so an
``agentmsg`` command the model runs could not tell which session it acts for.  This launcher fixes the id
before Gemini starts (``--session-id UUID``, or the UUID of ``--resume UUID``) and exports it to Gemini as
``GEMINI_SESSION_ID``, the variable Gemini sets for its hooks: Gemini passes its environment to the shell
tool, so ``agentmsg`` there resolves ``gemini:<id>`` (``identity.HOST_VARS``) and the hooks bind the same pin.

Weaker than Claude Code or Codex: a Gemini started without this launcher has no identity in its shell
(``--self gemini:<id>`` is needed), and a session switched inside Gemini (``/chat resume``, ``/resume``)
keeps the exported id of the session Gemini was started with.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Mapping, Sequence

from agentmsg.domain import validate as model
from agentmsg.errors import UsageError

SESSION_VAR = "GEMINI_SESSION_ID"


def _value(args: Sequence[str], *names: str) -> str | None:
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def gemini_argv(args: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The command and environment ``run gemini`` executes; a session id it cannot fix is refused."""
    exe = shutil.which("gemini", path=env.get("PATH"))
    if exe is None:
        raise UsageError("`gemini` is not on PATH; install Gemini CLI (npm install -g @google/gemini-cli)")
    args = list(args)
    resume = _value(args, "--resume", "-r")
    chosen = _value(args, "--session-id")
    if "--resume" in args or "-r" in args or any(a.startswith(("--resume=", "-r=")) for a in args):
        if resume is None or not _is_uuid(resume):
            raise UsageError("agentmsg run gemini: --resume needs the session's UUID (not 'latest' or an index), "
                             "so that the shell can be told which session it is")
        sid, argv = resume, [exe, *args]
    elif chosen is not None:
        if not _is_uuid(chosen):
            raise UsageError(f"agentmsg run gemini: --session-id must be a UUID, not {chosen[:60]!r}")
        sid, argv = chosen, [exe, *args]
    else:
        sid = str(uuid.uuid4())
        argv = [exe, "--session-id", sid, *args]
    model.pin(f"gemini:{sid}")  # the pin the shell will resolve
    return argv, {**env, SESSION_VAR: sid}


def _is_uuid(value: str) -> bool:
    try:
        return str(uuid.UUID(value)) == value.lower()
    except ValueError:
        return False


def run_gemini(args: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """Replace this process with Gemini CLI (never returns on success)."""
    argv, child = gemini_argv(args, os.environ if env is None else env)
    os.execve(argv[0], argv, child)
    return 0  # pragma: no cover - execve does not return
