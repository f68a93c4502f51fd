"""Claude Code: the plugin's hooks, the ``asyncRewake`` waiter, its peer socket and its env file.

Facts checked on 2.1.328 (docs/HOSTS-NOTES.md): every hook and every Bash command carries
``CLAUDE_CODE_SESSION_ID``; the plugin's ``bin/`` is on the Bash tool's PATH; ``CLAUDE_ENV_FILE`` names a file
whose exports later Bash commands source; ``~/.claude/sessions/<pid>.json`` notes the version and the peer
protocol of the socket in ``CLAUDE_CODE_MESSAGING_SOCKET``.
"""

from __future__ import annotations

from agentmsg.hosts.base import Host, NotifyError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from agentmsg.hosts.base import Rung

#: Claude Code's peer socket protocol as checked on 2.1.328 (``~/.claude/sessions/<pid>.json``).
PEER_PROTOCOL = 1
#: ``CLAUDE_CODE_ENTRYPOINT`` of the interactive TUI (``claude -p`` has ``sdk-cli``; checked on 2.1.328).
INTERACTIVE = "cli"
WAITER = "claude-waiter"


class Claude(Host):
    name = "claude"
    runtime = "claude-code"
    title = "Claude Code"
    shell_var = hook_var = "CLAUDE_CODE_SESSION_ID"
    runs_hooks = True
    midturn = True
    queues = True
    native_wake = True
    self_retrying = (WAITER,)
    fact_fields = ("claude_socket", "claude_version", "peer_protocol")
    program = "claude"
    session_vars = ("CLAUDE_CODE_SESSION_ID", "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_ENV_FILE",
                    "CLAUDE_PROJECT_DIR", "CLAUDE_PLUGIN_ROOT", "CLAUDE_PLUGIN_DATA", "CLAUDE_CODE_MESSAGING_SOCKET",
                    "CLAUDE_CODE_SSE_PORT")
    resumes = forks = True

    def spawn_argv(self, program: str, args: Sequence[str], prompt: str) -> list[str]:
        """The prompt after ``--``: some of Claude Code's options take several values (``--allowedTools``)."""
        return [program, *args, "--", prompt]

    def resume_argv(self, program: str, session: str, args: Sequence[str], prompt: str) -> list[str]:
        """``claude --resume ID``: the same session id, so the alias stays with its pin."""
        return [program, "--resume", session, *args, "--", prompt]

    def fork_argv(self, program: str, session: str, args: Sequence[str], prompt: str) -> list[str]:
        """``claude --resume ID --fork-session``: the conversation so far, under a new session id."""
        return [program, "--resume", session, "--fork-session", *args, "--", prompt]

    def session_started(self, env: Mapping[str, str], root: str) -> None:
        """The state root for later Bash commands, idempotently (SessionStart fires again on resume/clear).

        Not the collaboration: a session may join another one later, and a
        stale ``AGENTMSG_COLLAB`` would route its sends to the first.
        """
        path = env.get("CLAUDE_ENV_FILE")
        if not path:
            return
        from agentmsg import fsio

        quoted = "'" + root.replace("'", "'\"'\"'") + "'"  # always quoted: the line is compared as written
        wanted = [f"export AGENTMSG_HOME={quoted}"]
        try:
            have = set((fsio.read_bytes(path) or b"").decode("utf-8", "replace").splitlines())
            missing = [line for line in wanted if line not in have]
            if missing:  # never through a link, a FIFO or a hard link planted at the host's file
                fsio.append_entries(path, ("\n" + "\n".join(missing) + "\n").encode())
        except Exception as exc:  # UnsafePath: nothing written there, and the rest of SessionStart still runs
            from agentmsg.errors import UnsafePath

            if not isinstance(exc, UnsafePath):
                raise

    def facts(self, env: Mapping[str, str], pid: int | None, session: str) -> dict[str, Any]:
        facts: dict[str, Any] = {}
        if env.get("CLAUDE_CODE_MESSAGING_SOCKET"):
            facts["claude_socket"] = env["CLAUDE_CODE_MESSAGING_SOCKET"]
        if pid is not None:
            facts.update(_session_note(env.get("HOME", ""), pid, session))
        return facts

    def ring(self, root: str, pin: str, facts: Mapping[str, Any], line: str, ring: dict[str, Any], *,
             busy: bool) -> tuple[Rung | None, str]:
        """The waiter when one holds the session's lock (while a turn runs, the ring waits for the next one,
        re-armed at Stop); then the peer socket, only for the protocol checked here."""
        if busy:
            _leave_ring(root, pin, ring, queued=True)
            return ("recipient busy (rung when its turn ends)", WAITER), ""
        if waiter_armed(root, pin):
            _leave_ring(root, pin, ring, queued=False)
            return ("rang", WAITER), ""
        if facts.get("peer_protocol") == PEER_PROTOCOL and isinstance(facts.get("claude_socket"), str):
            try:
                peer_socket(str(facts["claude_socket"]), line)
                return ("rang", "claude-socket"), ""
            except (OSError, NotifyError):
                pass  # best effort: guarded tmux next
        return None, "no native path"


def _session_note(home: str, pid: int, session: str) -> dict[str, Any]:
    """Claude Code's own note on this process (``~/.claude/sessions/<pid>.json``, internal): its version and
    peer protocol, so the socket is used only where it was checked (docs/DELIVERY.md, "Wake-ups")."""
    import os

    from agentmsg import fsio, records

    raw = fsio.read_bytes(os.path.join(home, ".claude", "sessions", f"{pid}.json")) if home.startswith("/") else None
    try:
        doc = records.loads(raw[:65536].decode("utf-8")) if raw else None
    except (ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(doc, dict) or doc.get("sessionId") != session:
        return {}
    return {"claude_version": str(doc.get("version", ""))[:32], "peer_protocol": doc.get("peerProtocol")}


def _leave_ring(root: str, pin: str, ring: dict[str, Any], *, queued: bool) -> None:
    """The ring as a file the waiter reads (it rebuilds the line from the store)."""
    from agentmsg import fsio, records
    from agentmsg.backends.file import layout

    fsio.ensure_dir(root, layout.WAKE)
    doc = {**ring, "pin": pin, "queued": queued}
    fsio.atomic_write(layout.session_file(root, pin, layout.WAITER_RING), records.dumps(doc).encode(), durable=False)


def waiter_armed(root: str, pin: str) -> bool:
    """Whether a waiter holds the session's lock (the one probe: :func:`agentmsg.fsio.held`)."""
    from agentmsg.backends.file import layout
    from agentmsg.fsio import held

    return held(layout.session_file(root, pin, layout.WAITER_LOCK))


def peer_socket(path: str, line: str) -> None:
    """One user line on Claude Code's peer socket (undocumented; it keeps a draft and queues behind a dialog).

    Only a socket of this user: a path a peer planted elsewhere is never connected to.
    """
    import json
    import os
    import socket
    import stat

    st = os.lstat(path)
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
        raise NotifyError("not this user's socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2.0)
        sock.connect(path)
        sock.sendall(json.dumps({"type": "user", "message": {"role": "user", "content": line}}).encode() + b"\n")


def interactive(env: Mapping[str, str]) -> bool:
    """Whether this is the interactive TUI, where the waiter serves (``claude -p`` has no idle session)."""
    return env.get("CLAUDE_CODE_ENTRYPOINT") == INTERACTIVE


HOST = Claude()
