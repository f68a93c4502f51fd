"""Errors carry their exit code; one place (the CLI) turns them into a line.

Codes are part of the public contract (README, "Exit codes"): scripts and
agents branch on them, so a code is never reused for another meaning.
"""

from __future__ import annotations


class AgentmsgError(Exception):
    """Base error. ``str(err)`` is the one line a user sees."""

    code = 1
    prefix = "error"
    #: What did happen before the failure (e.g. a stored message whose
    #: notification failed), reported alongside the error.
    result: dict[str, object] | None = None

    def line(self) -> str:
        return f"{self.prefix}: {self}"


class UsageError(AgentmsgError):
    code = 2
    prefix = "usage"


class PayloadInvalid(UsageError):
    """A typed message's payload breaks its schema (issue 31): the field and the rule, nothing stored."""

    prefix = "payload"


class NotFound(AgentmsgError):
    code = 3
    prefix = "not found"


class UnknownAgent(AgentmsgError):
    """The registry has no such alias: fail loudly, write nothing."""

    code = 4

    def __init__(self, name: str, known: tuple[str, ...] = ()) -> None:
        super().__init__(name)
        self.name = name
        #: the aliases that do exist there, so a typo can be put right (issue 30)
        self.known = known

    def line(self) -> str:
        shown = ", ".join(self.known[:8]) + (f" and {len(self.known) - 8} more" if len(self.known) > 8 else "")
        there = f" (aliases here: {shown})" if self.known else ""  # bounded: at most 8 named
        return f"FAILED(unknown agent): {self.name}{there}"


class Conflict(AgentmsgError):
    code = 5
    prefix = "conflict"


class Closed(AgentmsgError):
    code = 6
    prefix = "closed"


class NotifyFailed(AgentmsgError):
    """Stored durably, but the notification adapter failed."""

    code = 7

    def __init__(self, detail: str, retry: str) -> None:
        super().__init__(detail)
        self.retry = retry

    def line(self) -> str:
        return f"stored, not yet surfaced (notify failed: {self}); retry: {self.retry}"


class StoreFailed(AgentmsgError):
    code = 8
    prefix = "store failed"


class IdentityError(AgentmsgError):
    code = 9
    prefix = "identity"


class TooLarge(AgentmsgError):
    code = 10
    prefix = "too large"


class SecretRefused(AgentmsgError):
    code = 11

    def __init__(self, kind: str, line_no: int, where: str = "body") -> None:
        super().__init__(f"{kind} at line {line_no}" + (f" of the {where}" if where not in ("body", "note") else ""))
        self.kind = kind

    def line(self) -> str:
        return f"REFUSED(secret): {self}"


class UnsafePath(AgentmsgError):
    code = 12
    prefix = "unsafe path"


class TamperDetected(AgentmsgError):
    code = 13
    prefix = "verify"


class WatchTimeout(AgentmsgError):
    code = 14
    prefix = "timeout"


class DeliveryInactive(AgentmsgError):
    code = 15
    prefix = "delivery"


class Disagreement(AgentmsgError):
    """Entry points run different agentmsg copies, or resolve different roots."""

    code = 16
    prefix = "doctor"


class SpawnFailed(AgentmsgError):
    """A spawned (or resumed) session did not start or never got ready: it was stopped, nothing stays bound."""

    code = 17
    prefix = "spawn failed"


class NothingCanRing(AgentmsgError):
    """``wake on`` where no mechanism could ever ring the session (no native wake-up, no tmux pane of its own)."""

    code = 18
    prefix = "wake"


class HostCannot(AgentmsgError):
    """The host has no way to do this from agentmsg (resume or fork a session): nothing was started or written."""

    code = 19
    prefix = "host cannot"


class StoreUnreachable(AgentmsgError):
    """The database store could not be reached, or went away mid-command: nothing was stored."""

    code = 20
    prefix = "store unreachable"


class SchemaMismatch(AgentmsgError):
    """The database schema is missing, older than this client needs, or newer than it knows."""

    code = 21
    prefix = "schema"


class OutcomeUnknown(AgentmsgError):
    """The resident helper running a forwarded command ended before it said how the command ended: it may or
    may not have taken effect (each write is whole or absent).  The thin client reports it
    (:mod:`agentmsg.cli.thin`)."""

    code = 22
    prefix = "outcome unknown"


EXIT_CODES: tuple[tuple[int, str], ...] = (
    (0, "success"),
    (1, "internal error (the traceback goes to ~/.cache/agentmsg/crash.log)"),
    (UsageError.code, "bad arguments or bad input (including a file name too long)"),
    (NotFound.code, "no such collaboration, message or attempt"),
    (UnknownAgent.code, "FAILED(unknown agent): recipient not in the registry"),
    (Conflict.code, "conflict: alias or pin taken, id reused with other content"),
    (Closed.code, "the collaboration is closed"),
    (NotifyFailed.code, "stored, not yet surfaced: notification failed"),
    (StoreFailed.code, "store failed: nothing was stored (lock held too long, disk full, I/O error, "
                       "read-only file system)"),
    (IdentityError.code, "identity missing, mismatched or not permitted"),
    (TooLarge.code, "subject or body over the documented limit"),
    (SecretRefused.code, "REFUSED(secret): a credential was found"),
    (UnsafePath.code, "unsafe path: a symlink, a FIFO or other non-regular file, a hard link, a "
                      "non-directory or a permission-denied path inside the state root, or at a file agentmsg "
                      "writes outside it (a host's configuration, a project's files)"),
    (TamperDetected.code, "verify found edited, removed or reordered records"),
    (WatchTimeout.code, "watch timed out with no matching event"),
    (DeliveryInactive.code, "delivery envelope missing, expired or spent"),
    (Disagreement.code, "doctor: entry points disagree or did not answer"),
    (SpawnFailed.code, "spawn or resume failed: the host did not start or never got ready; it was stopped and "
                       "nothing stays bound"),
    (NothingCanRing.code, "wake on: nothing could ring this session (no native wake-up, no tmux pane of its own)"),
    (HostCannot.code, "host cannot: this host cannot resume or fork a session from agentmsg (docs/LIFECYCLE.md); "
                      "nothing was started or written"),
    (StoreUnreachable.code, "store unreachable: the PostgreSQL store could not be reached or went away; "
                            "nothing was stored (retry with the same --id)"),
    (SchemaMismatch.code, "schema: the PostgreSQL schema is missing, too old (run `agentmsg db migrate`) or newer "
                          "than this client"),
    (OutcomeUnknown.code, "outcome unknown: the helper running the command ended before it finished; it may "
                          "or may not have taken effect (check, then retry; a send with its --id is retried)"),
    (130, "interrupted (Ctrl-C)"),
    (141, "stdout closed early (the reader, e.g. head, went away)"),
)
