"""Typed handoffs in the service (issue 31): a typed draft made ready to send (its payload checked, its
artifacts hashed, its text scanned), and the views: a task's thread, every handoff, every gate.

The rules are :mod:`agentmsg.domain.handoffs`; reading YAML is the CLI's.  Artifacts are hashed here at
send time, in the sender's checkout, and again when shown, in the reader's: a location is relative to
the repository root (the nearest folder above the working directory holding ``.git``), or absolute
outside any repository.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable
from typing import Any

from agentmsg.domain import handoffs
from agentmsg.domain.values import Message, Pin
from agentmsg.service import readers
from agentmsg.service.context import Ctx

Payload = dict[str, Any]
_CHUNK = 1 << 20


# ---- sending ---------------------------------------------------------------------------


def prepare(given: Payload, *, attach: Iterable[str], cwd: str, redact: bool) -> tuple[Payload, int]:
    """A typed draft's ``handoff``: the payload validated, ``attach`` added, artifacts hashed, secrets refused
    (or redacted, with how many).  Raises before anything is stored."""
    type_ = given.get("type") or ""
    if type_ not in handoffs.TYPES:
        raise handoffs.invalid("--type", f"must be one of {' | '.join(handoffs.TYPES)}")
    payload = dict(given.get("payload") or {}) if isinstance(given.get("payload"), dict) else given.get("payload")
    attach = list(attach)
    field = handoffs.artifacts_of(type_)
    if attach:
        if field is None:
            raise handoffs.invalid("--attach", f"a {type_} carries no artifacts (a task or a result does)")
        if isinstance(payload, dict):
            payload[field] = [*(payload.get(field) or []), *attach]
    payload = handoffs.validate(type_, payload)
    redacted = 0
    if redact:
        payload, redacted = _redact(payload)
    else:
        _refuse_secrets(type_, payload)
    if field and payload.get(field):
        repo = repo_root(cwd)
        payload[field] = [_hashed(f"{type_}.{field}[{i}]", a, cwd, repo) for i, a in enumerate(payload[field])]
    out: Payload = {"type": type_, "payload": payload,
                    **handoffs.envelope({k: given.get(k) for k in ("workflow_run_id", "phase")})}
    if given.get("declared"):
        out["declared"] = given["declared"]
    return out, redacted


def flags_text(handoff: Payload) -> str:
    """The text of a handoff the injection check reads (its payload as shown)."""
    return handoffs.render(handoff)


def _refuse_secrets(type_: str, payload: Payload) -> None:
    from agentmsg.errors import SecretRefused
    from agentmsg.text import secrets

    found = secrets.scan(handoffs.render({"type": type_, "payload": payload}))
    if found:
        raise SecretRefused(found[0].kind, found[0].line, "payload")


def _redact(value: Any) -> tuple[Any, int]:
    from agentmsg.text import secrets

    if isinstance(value, str):
        text, found = secrets.redact(value)
        return text, len(found)
    if isinstance(value, list):
        pairs = [_redact(v) for v in value]
        return [v for v, _n in pairs], sum(n for _v, n in pairs)
    if isinstance(value, dict):
        done = {k: _redact(v) for k, v in value.items()}
        return {k: v for k, (v, _n) in done.items()}, sum(n for _v, n in done.values())
    return value, 0


# ---- artifacts -------------------------------------------------------------------------


def repo_root(cwd: str) -> str | None:
    """The repository a working directory is in: the nearest folder up holding ``.git``; None outside any."""
    here = os.path.abspath(cwd)
    while True:
        if os.path.lexists(os.path.join(here, ".git")):
            return here
        up = os.path.dirname(here)
        if up == here:
            return None
        here = up


def _hashed(where: str, art: Payload, cwd: str, repo: str | None) -> Payload:
    """An artifact with its repository-relative location, size and sha256 as of now (one named by a version or
    a hash the sender gave is kept as given)."""
    if art.get("sha256") or art.get("version"):
        return art
    path = os.path.join(cwd, art["location"])
    try:
        digest, size = _sha256(path)
    except FileNotFoundError:
        raise handoffs.invalid(f"{where}.location", f"no such file {art['location']!r}") from None
    except IsADirectoryError:
        raise handoffs.invalid(f"{where}.location", f"{art['location']!r} is a directory, not a file") from None
    except ValueError as exc:
        raise handoffs.invalid(f"{where}.location", f"{art['location']!r} {exc}") from None
    except OSError as exc:
        raise handoffs.invalid(f"{where}.location", f"cannot read {art['location']!r}: "
                                                     f"{exc.strerror or exc}") from None
    real = os.path.abspath(path)
    inside = repo is not None and os.path.commonpath([real, repo]) == repo
    location = os.path.relpath(real, repo).replace(os.sep, "/") if inside and repo else real
    return {**art, "location": location, "sha256": digest, "size": size}


def _sha256(path: str) -> tuple[str, int]:
    """The file's sha256 and size; ValueError for anything but a regular file (a FIFO is never opened)."""
    import hashlib

    st = os.stat(path)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(path)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("is not a regular file (a FIFO, a device or a socket)")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the stat
            raise ValueError("is not a regular file")
        h, size = hashlib.sha256(), 0
        while chunk := os.read(fd, _CHUNK):
            h.update(chunk)
            size += len(chunk)
        return h.hexdigest(), size
    finally:
        os.close(fd)


def artifact_state(art: Payload, cwd: str) -> Payload:
    """An artifact as it is now in the reader's checkout: unchanged, changed, missing, or unverified (named by a
    version only, or a relative location with no repository here)."""
    out = dict(art)
    if not art.get("sha256"):
        out["state"] = "unverified"
        return out
    loc = art["location"]
    if os.path.isabs(loc):
        path = loc
    else:
        repo = repo_root(cwd)
        if repo is None:
            out["state"] = "unverified"
            out["why"] = "not in a repository"
            return out
        path = os.path.join(repo, loc)
    try:
        digest, _size = _sha256(path)
    except FileNotFoundError:
        out["state"] = "missing"
        return out
    except (OSError, ValueError):
        out["state"] = "changed"  # a directory or a FIFO where the file was
        return out
    out["state"] = "unchanged" if digest == art["sha256"] else "changed"
    return out


# ---- views -----------------------------------------------------------------------------


def _typed(ctx: Ctx, cids: list[str]) -> list[Message]:
    out: list[Message] = []
    for cid in cids:
        reg = ctx.store.registry(cid)
        for alias in reg.participants:
            out += [m for m in ctx.store.history(cid, alias) if m.handoff]
    return sorted(out, key=lambda m: (m.ts, m.cseq, m.id))  # cseq: the collaboration's order within a millisecond


def _cids(ctx: Ctx, who: Pin | None, collab: str | None) -> list[str]:
    if collab or ctx.env.get("AGENTMSG_COLLAB"):
        return [readers.check(ctx, who, collab or ctx.env["AGENTMSG_COLLAB"])]
    return readers.collabs(ctx, who)


def _brief(m: Message, cwd: str | None = None) -> Payload:
    h = dict(m.handoff or {})
    out: Payload = {"id": m.id, "collab": m.collab, "from": m.sender, "to": m.to, "ts": m.ts, "subject": m.subject,
                    "type": h.get("type"), "payload": h.get("payload"), "thread": h.get("thread"),
                    "correlation_id": h.get("correlation_id"), "workflow_run_id": h.get("workflow_run_id"),
                    "phase": h.get("phase")}
    field = handoffs.artifacts_of(str(h.get("type")))
    if cwd is not None and field:
        out["artifacts"] = [artifact_state(a, cwd) for a in (h.get("payload") or {}).get(field) or []]
    return out


def _epoch(ts: str) -> float:
    import calendar

    return calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + ts[19:].rstrip("Z"))


def _gate(req: Message, answers: list[Message], now: float) -> Payload:
    p = (req.handoff or {})["payload"]
    response = next((a for a in answers if (a.handoff or {}).get("type") == "gate_response"), None)
    decision = response.handoff["payload"]["decision"] if response and response.handoff else None
    expires = _epoch(req.ts) + 60 * int(p["timeout_minutes"])
    return {**_brief(req), "gate_id": p["gate_id"], "required_action": p["required_action"],
            "state": handoffs.gate_state(_epoch(req.ts), int(p["timeout_minutes"]), decision, now),
            "expires": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires)),
            "response": _brief(response) if response else None}


def _threads(msgs: list[Message]) -> dict[str, list[Message]]:
    by: dict[str, list[Message]] = {}
    for m in msgs:
        by.setdefault(str((m.handoff or {}).get("thread") or m.id), []).append(m)
    return by


def _answers(msgs: list[Message], mid: str) -> list[Message]:
    return [m for m in msgs if (m.handoff or {}).get("correlation_id") == mid]


def _task(task: Message, msgs: list[Message], cwd: str, now: float) -> Payload:
    answers = _answers(msgs, task.id)
    thread = [m for m in msgs if (m.handoff or {}).get("thread") == (task.handoff or {}).get("thread")]
    return {**_brief(task, cwd),
            "results": [_brief(m, cwd) for m in answers if (m.handoff or {}).get("type") == "result"],
            "statuses": [_brief(m) for m in answers if (m.handoff or {}).get("type") == "status"],
            "gates": [_gate(m, _answers(msgs, m.id), now) for m in thread
                      if (m.handoff or {}).get("type") == "gate_request"],
            "thread_messages": [{"id": m.id, "type": (m.handoff or {}).get("type"), "from": m.sender, "to": m.to,
                                 "ts": m.ts, "correlation_id": (m.handoff or {}).get("correlation_id")}
                                for m in thread]}


def thread_of(ctx: Ctx, msg: Message) -> list[Payload]:
    """Every typed message of ``msg``'s thread, in order: id, type, sender, recipient, time, what it answers."""
    thread = str((msg.handoff or {}).get("thread") or msg.id)
    return [{"id": m.id, "type": (m.handoff or {}).get("type"), "from": m.sender, "to": m.to, "ts": m.ts,
             "correlation_id": (m.handoff or {}).get("correlation_id")}
            for m in _typed(ctx, [msg.collab]) if (m.handoff or {}).get("thread") == thread]


def task_show(ctx: Ctx, *, collab: str | None, self_flag: str | None, message_id: str, cwd: str) -> Payload:
    """One typed message's thread: the task with its results, statuses and gates, each artifact's state now."""
    who = readers.reader(ctx, self_flag)
    cid = ctx.collab(collab, who) if collab or ctx.env.get("AGENTMSG_COLLAB") else None
    msg = readers.message(ctx, who, message_id, cid)  # as ``show`` reads it (commands.shown)
    if not msg.handoff:
        from agentmsg.errors import NotFound

        raise NotFound(f"message {msg.id} is not a typed handoff")
    msgs = _typed(ctx, [msg.collab])
    thread = str(msg.handoff.get("thread") or msg.id)
    root = next((m for m in msgs if m.id == thread), msg)
    if (root.handoff or {}).get("type") == "task":
        return {"collab": msg.collab, "task": _task(root, msgs, cwd, time.time())}
    return {"collab": msg.collab, "task": None,
            "thread_messages": [_brief(m, cwd) for m in msgs if (m.handoff or {}).get("thread") == thread]}


def listing(ctx: Ctx, *, collab: str | None, self_flag: str | None, cwd: str, workflow_run_id: str | None = None,
            phase: str | None = None) -> Payload:
    """Every task (optionally of one run and phase) with its results tied to it and its artifacts' states."""
    msgs = _typed(ctx, _cids(ctx, readers.reader(ctx, self_flag), collab))
    now = time.time()
    tasks = [m for m in msgs if (m.handoff or {}).get("type") == "task"
             and (workflow_run_id is None or (m.handoff or {}).get("workflow_run_id") == workflow_run_id)
             and (phase is None or (m.handoff or {}).get("phase") == phase)]
    return {"tasks": [_task(t, msgs, cwd, now) for t in tasks]}


def gates(ctx: Ctx, *, collab: str | None, self_flag: str | None, open_only: bool = False) -> Payload:
    """Every gate with its state: open, approved, aborted or timed out (``open_only``: open and timed out)."""
    msgs = _typed(ctx, _cids(ctx, readers.reader(ctx, self_flag), collab))
    now = time.time()
    out = [_gate(m, _answers(msgs, m.id), now) for m in msgs if (m.handoff or {}).get("type") == "gate_request"]
    if open_only:
        out = [g for g in out if g["state"] in ("open", "timed out")]
    return {"gates": out}
