"""Starting and stopping sessions: ``agentmsg spawn``, ``kill`` and ``resume`` (docs/LIFECYCLE.md).

A spawn, step by step:

1. The spawner (a member) gets a one-time ticket for the new alias: the collaboration records only its sha256
   (``invited``), valid for the wait and a minute more.
2. ``runtime/spawn.start_session`` starts the host's own interactive CLI (``Host.spawn_argv``) in a new tmux
   window, with the spawner's environment minus agentmsg's variables and every host's session variables
   (``Host.session_vars``), plus the root, the ticket and its collaboration.  Its first prompt is a fixed
   hello line from agentmsg.
3. **Readiness**: the session's own SessionStart hook consumes the ticket and joins as the alias
   (``hooks/ticket.py``), then its first turn ends (its Stop hook marks it): bound, and its model answers.
4. ``spawned`` is recorded (who, which pin, host, the tmux window and its first process: pid and start time),
   and the task, if any, is sent as a request from the spawner and rung into the new session's pane.

On any failure before readiness (no such program, tmux refused, the host exited, the wait timed out) the
window is closed, and one ``spawn-failed`` event revokes the ticket and undoes a binding the session made.
"""

from __future__ import annotations

import os
import time
from typing import Any

from agentmsg.domain import kinds, rules, validate
from agentmsg.domain.values import Draft, Pin
from agentmsg.errors import HostCannot, SpawnFailed, UsageError
from agentmsg.hosts import registry
from agentmsg.runtime import spawn as starter
from agentmsg.runtime import spawned
from agentmsg.runtime.spawn import TICKET_COLLAB_VAR, TICKET_VAR
from agentmsg.service import commands
from agentmsg.service.context import Ctx

Payload = dict[str, Any]

WHERE = ("tmux", "headless")
TIMEOUT_DEFAULT, TIMEOUT_MAX = 60.0, 600.0
#: How long an unused spawn ticket outlives the wait (a crash of the spawner leaves nothing usable for long).
TICKET_SLACK = 60.0
POLL = 0.1


def child_env(env: dict[str, str] | Any, root: str, ticket: str, collab: str) -> dict[str, str]:
    """The spawner's environment minus agentmsg's own variables, every host's session variables and those that
    would make a host non-interactive (``Host.headless_vars``), plus the state root and the ticket: a session
    spawned from another host never carries that host's session id, nor a CI job's ``CI=true``."""
    drop = {v for h in registry.all_hosts() for v in (*h.session_vars, *h.headless_vars)}
    drop |= {h.shell_var for h in registry.all_hosts() if h.shell_var} | {"TMUX", "TMUX_PANE"}
    out = {k: v for k, v in env.items() if not k.startswith("AGENTMSG_") and k not in drop}
    out.update({"AGENTMSG_HOME": root, TICKET_VAR: ticket, TICKET_COLLAB_VAR: collab})
    return out


def hello(spawner: str, alias: str, collab: str, task: bool) -> str:
    """The first prompt of a spawned session: fixed text from agentmsg, no peer text."""
    then = (f" {spawner}'s request (your task) comes at the next prompt, inside agentmsg's peer-data boundary."
            if task else " Nothing is asked yet.")
    return (f"agentmsg: {spawner} started this session as participant {alias} of collaboration {collab}.{then} "
            "Reply with one short line to say you are ready.")


def spawn(ctx: Ctx, *, collab: str | None, self_flag: str | None, host: str, alias: str, task: str | None,
          cwd: str | None, where: str, timeout: str | None, args: list[str]) -> Payload:
    spec = registry.get(host)
    if spec is None or spec.program is None:
        can = ", ".join(h.name for h in registry.all_hosts() if h.program)
        raise UsageError(f"agentmsg spawn starts one of: {can}")
    where = validate.choice(where, WHERE, "--where")
    seconds = validate.duration(timeout, "--timeout", maximum=TIMEOUT_MAX) if timeout else TIMEOUT_DEFAULT
    alias = validate.alias(alias)
    folder = _folder(cwd)
    if task is not None:
        task = validate.body(task, "--task")
        commands._refuse_secrets(task=task)
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    _file_store(ctx)
    spawner = rules.spawn_target(ctx.store.registry(cid), who, alias)
    _where_ok(ctx, where)
    program = _program(spec.program, ctx.env)

    def argv(prompt: str) -> list[str]:
        return spec.spawn_argv(program, args, prompt)

    return _launch(ctx, cid, who, spawner, alias, spec, argv, folder=folder, where=where, seconds=seconds,
                   args=args, task=task, how="spawn")


def fork(ctx: Ctx, *, collab: str | None, self_flag: str | None, alias: str, new_alias: str, cwd: str | None,
         where: str, timeout: str | None, args: list[str]) -> Payload:
    """A new session that starts from ALIAS's conversation (the host's own fork), bound to a new alias with a
    ticket, exactly as a spawn: the forked session gets a new session id, so a new pin."""
    where = validate.choice(where, WHERE, "--where")
    seconds = validate.duration(timeout, "--timeout", maximum=TIMEOUT_MAX) if timeout else TIMEOUT_DEFAULT
    alias, new_alias = validate.alias(alias), validate.alias(new_alias)
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    _file_store(ctx)
    reg = ctx.store.registry(cid)
    source = reg.holder(alias)
    if source is None:
        from agentmsg.errors import NotFound

        raise NotFound(f"no active participant {alias} in collaboration {cid}")
    spawner = rules.spawn_target(reg, who, new_alias)
    runtime, _, session = source.partition(":")
    spec = registry.of_runtime(runtime)
    if spec is None or not spec.forks or spec.program is None:
        raise HostCannot(f"{spec.title if spec else runtime} cannot fork a session from agentmsg "
                         "(docs/LIFECYCLE.md)")
    last = spawn_of(ctx, cid, alias, source)
    folder = _folder(cwd or (str(last["cwd"]) if last and isinstance(last.get("cwd"), str) else None))
    _where_ok(ctx, where)
    program = _program(spec.program, ctx.env)

    def argv(prompt: str) -> list[str]:
        return spec.fork_argv(program, session, args, prompt)

    return _launch(ctx, cid, who, spawner, new_alias, spec, argv, folder=folder, where=where, seconds=seconds,
                   args=args, task=None, how="fork")


def _launch(ctx: Ctx, cid: str, who: Pin, spawner: str, alias: str, spec: Any, argv: Any, *, folder: str,
            where: str, seconds: float, args: list[str], task: str | None, how: str) -> Payload:
    """A ticket for ``alias``, the session started with it, the handshake awaited; undone on any failure."""
    _where_ok(ctx, where)
    ticket, digest = _ticket(ctx, cid, who, alias, seconds)
    env = child_env(dict(ctx.env), str(ctx.root), ticket, cid)
    try:
        place = starter.start_session(str(ctx.root), argv(hello(spawner, alias, cid, task is not None)), env,
                                      cwd=folder, where=where, name=alias, caller_env=ctx.env)
    except SpawnFailed as exc:
        _abandon(ctx, cid, who, alias, digest, None, str(exc))
        raise
    try:
        pin = _ready(ctx, cid, alias, digest, place, seconds, spec.title, spec.spawn_hint(args))
    except BaseException as exc:  # a timeout, the host's exit, Ctrl-C: stop it, unbind, revoke
        _abandon(ctx, cid, who, alias, digest, place, str(exc) or type(exc).__name__)
        raise
    return _started(ctx, cid, who, alias, pin, place, spec.name, how, task)


def resume(ctx: Ctx, *, collab: str | None, self_flag: str | None, alias: str, cwd: str | None, where: str,
           timeout: str | None, args: list[str]) -> Payload:
    """Start an ended session again through its host's own resume (``Host.resume_argv``), under its alias.

    Both hosts checked here keep the session id on resume, so the pin and its binding stay; readiness is its
    SessionStart recording a new host process, and a first turn ending, after the resume began."""
    from agentmsg.errors import Conflict
    from agentmsg.runtime import facts as sessionfacts

    where = validate.choice(where, WHERE, "--where")
    seconds = validate.duration(timeout, "--timeout", maximum=TIMEOUT_MAX) if timeout else TIMEOUT_DEFAULT
    alias = validate.alias(alias)
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    _file_store(ctx)
    reg = ctx.store.registry(cid)
    last = spawn_of(ctx, cid, alias, reg.holder(alias))
    pin = rules.may_restart(reg, who, alias, last)
    runtime, _, session = pin.partition(":")
    spec = registry.of_runtime(runtime)
    if spec is None or not spec.resumes or spec.program is None:
        raise HostCannot(f"{spec.title if spec else runtime} cannot resume a session from agentmsg "
                         "(docs/LIFECYCLE.md)")
    found = sessionfacts.load(str(ctx.root), pin).get("facts")
    if isinstance(found, dict) and type(found.get("pid")) is int and sessionfacts.alive(found):
        raise Conflict(f"{alias}'s session is still running (pid {found['pid']}); agentmsg kill {alias} first")
    folder = _folder(cwd or (str(last["cwd"]) if last and isinstance(last.get("cwd"), str) else None))
    program = _program(spec.program, ctx.env)
    spawner = reg.alias_of(str(who)) or str(who)
    line = (f"agentmsg: {spawner} resumed this session as participant {alias} of collaboration {cid}. "
            "Reply with one short line to say you are ready.")
    argv = spec.resume_argv(program, session, args, line)
    _where_ok(ctx, where)
    digest = None
    if reg.alias_of(str(who)) is not None:  # a member's resume carries a ticket, should the host change the id
        import secrets

        ticket = commands.TICKET_PREFIX + secrets.token_urlsafe(24)
        digest = commands.ticket_hash(ticket)
        with ctx.store.transaction(cid) as tx:
            tx.append_event(rules.resume_ticket_event(tx.registry(), who, alias, digest,
                                                      expires_at=time.time() + seconds + TICKET_SLACK))
        env = child_env(dict(ctx.env), str(ctx.root), ticket, cid)
    else:
        env = {k: v for k, v in child_env(dict(ctx.env), str(ctx.root), "", cid).items()
               if k not in (TICKET_VAR, TICKET_COLLAB_VAR)}
    since = time.time()
    try:
        place = starter.start_session(str(ctx.root), argv, env, cwd=folder, where=where, name=alias,
                                      caller_env=ctx.env)
    except SpawnFailed as exc:
        if digest is not None:
            _abandon(ctx, cid, who, alias, digest, None, str(exc), undo=False)
        raise
    try:
        now_pin = _resumed(ctx, cid, alias, pin, digest, place, since, seconds, spec.title)
    except BaseException as exc:
        if digest is not None:
            _abandon(ctx, cid, who, alias, digest, place, str(exc) or type(exc).__name__, undo=False)
        else:
            try:
                spawned.stop(place)
            except LookupError:
                pass
        raise
    if reg.alias_of(str(who)) is None:  # a human: pin outside the collaboration: no alias to record it under
        return _place_payload(cid, who, alias, now_pin, place, spec.name, "resume", None)
    out = _started(ctx, cid, who, alias, now_pin, place, spec.name, "resume", None, ticket=digest)
    out["succeeded"] = pin if now_pin != pin else None
    return out


def _resumed(ctx: Ctx, cid: str, alias: str, pin: str, digest: str | None, place: dict[str, Any], since: float,
             seconds: float, title: str) -> str:
    """Wait until the resumed session is ready; its pin: the same one (the host kept the id), or the new one
    its SessionStart moved the alias to with the resume ticket (a ``succeeded`` event, reason ``resume``)."""
    from agentmsg.backends.file import idle
    from agentmsg.runtime import facts as sessionfacts

    deadline = time.monotonic() + seconds
    while True:
        now_pin = pin
        if digest is not None:
            for ev in ctx.store.events(cid):
                if ev.get("type") == kinds.SUCCEEDED and ev.get("ticket") == digest and ev.get("alias") == alias:
                    now_pin = str(ev["pin"])
        found = sessionfacts.load(str(ctx.root), now_pin)
        facts = found.get("facts")
        fresh = (isinstance(facts, dict) and type(facts.get("pid")) is int and sessionfacts.alive(facts)
                 and float(found.get("turn_at") or 0) >= since - 1)
        turn_at, rest_at = idle.presence_marks(str(ctx.root), now_pin)
        if fresh and turn_at is not None and rest_at is not None and since <= turn_at < rest_at:
            return now_pin
        running, _ = spawned.pane_state(str(place["socket"]), str(place["pane"]))
        if not running:
            why = spawned.last_line(str(place["socket"]), str(place["pane"]))
            raise SpawnFailed(f"{title} exited before the resumed session was ready" + (f": {why}" if why else ""))
        if time.monotonic() >= deadline:
            raise SpawnFailed(f"{title} did not resume {pin} within {seconds:g}s")
        time.sleep(POLL)


def _where_ok(ctx: Ctx, where: str) -> None:
    """``--where tmux`` needs the tmux the caller runs in: refused before anything is written."""
    if where == "tmux" and starter.user_tmux(ctx.env) is None:
        raise UsageError("--where tmux opens a window in the tmux you run in, and $TMUX is not set: run it inside "
                         "tmux, or use --where headless")


def _folder(cwd: str | None) -> str:
    folder = os.path.abspath(os.path.expanduser(cwd)) if cwd else os.getcwd()
    if not os.path.isdir(folder):
        raise UsageError(f"--cwd {folder}: not a directory")
    return folder


def _file_store(ctx: Ctx) -> None:
    """The new session's hook binds itself in the state root: a remote store's replica root takes no writes."""
    if ctx.store.kind != "file" or getattr(ctx.store, "replica_of", None) is not None:
        raise UsageError("agentmsg spawn and resume need the file store at this root (a session's hooks bind it "
                         "there); they do not run against a remote store or its replica root")


def _program(name: str, env: Any) -> str:
    import shutil

    found = shutil.which(name, path=env.get("PATH"))
    if found is None:
        raise SpawnFailed(f"{name}: not found on PATH; nothing was started")
    return found


def _ticket(ctx: Ctx, cid: str, who: Pin, alias: str, seconds: float) -> tuple[str, str]:
    import secrets

    ticket = commands.TICKET_PREFIX + secrets.token_urlsafe(24)
    digest = commands.ticket_hash(ticket)
    ctx.mailbox.invite(cid, who, digest, for_alias=alias, expires_at=time.time() + seconds + TICKET_SLACK)
    return ticket, digest


def _ready(ctx: Ctx, cid: str, alias: str, digest: str, place: dict[str, Any], seconds: float, title: str,
           hint: str) -> str:
    """Wait until the session bound the alias with the ticket and its first turn ended; its pin."""
    from agentmsg.backends.file import idle

    deadline = time.monotonic() + seconds
    pin: str | None = None
    while True:
        if pin is None:
            reg = ctx.store.registry(cid)
            held = reg.participants.get(alias)
            if held is not None and held.active and digest not in reg.tickets:
                pin = _joined_with(ctx, cid, alias, digest)
        if pin is not None:
            turn_at, rest_at = idle.presence_marks(str(ctx.root), pin)
            if turn_at is not None and rest_at is not None and rest_at > turn_at:
                return pin
        running, _ = spawned.pane_state(str(place["socket"]), str(place["pane"]))
        if not running:
            why = spawned.last_line(str(place["socket"]), str(place["pane"]))
            raise SpawnFailed(f"{title} exited before it was ready" + (f": {why}" if why else ""))
        if time.monotonic() >= deadline:
            shown = spawned.last_line(str(place["socket"]), str(place["pane"]))
            screen = f" (its screen: {shown})" if shown else ""
            if pin is None:
                raise SpawnFailed(f"{title} did not bind {alias} within {seconds:g}s: its SessionStart hook never "
                                  f"used the ticket; {hint}{screen}")
            raise SpawnFailed(f"{title} bound {alias} but its first turn did not end within {seconds:g}s: is its "
                              f"model reachable?{screen}")
        time.sleep(POLL)


def _joined_with(ctx: Ctx, cid: str, alias: str, digest: str) -> str | None:
    """The pin that joined ``alias`` with this very ticket (never one that took the alias another way)."""
    for ev in ctx.store.events(cid):
        if ev.get("type") == kinds.JOINED and ev.get("alias") == alias and ev.get("ticket") == digest:
            return str(ev["pin"])
    return None


def _abandon(ctx: Ctx, cid: str, who: Pin, alias: str, digest: str, place: dict[str, Any] | None, why: str, *,
             undo: bool = True) -> None:
    """After a failed spawn: the half-started session stopped, then its ticket revoked and the binding it made
    with that ticket undone (``undo``; a failed resume leaves the alias where it is)."""
    if place is not None:
        try:
            spawned.stop(place)
        except LookupError:
            pass  # it ended by itself
    joined = _joined_with(ctx, cid, alias, digest) if undo else None
    with ctx.store.transaction(cid) as tx:
        tx.append_event(rules.spawn_failed_event(tx.registry(), who, alias, digest, why, joined))


def _started(ctx: Ctx, cid: str, who: Pin, alias: str, pin: str, place: dict[str, Any], host: str, how: str,
             task: str | None, ticket: str | None = None) -> Payload:
    """Ready: record where it runs (spending a resume's unused ticket), let its window close as usual from now
    on, and hand it its task."""
    with ctx.store.transaction(cid) as tx:
        made = rules.spawned_event(tx.registry(), who, alias, pin, place, host=host, how=how)
        ev = tx.append_event({**made, "ticket": ticket} if ticket else made)
    try:
        spawned.keep_dead(str(place["socket"]), str(place["window"]), False)
    except SpawnFailed:
        pass
    out = _place_payload(cid, who, alias, pin, place, host, how, ev["seq"])
    if task is not None:
        out["task"] = _hand_task(ctx, cid, who, alias, place, task)
    return out


def _place_payload(cid: str, who: Pin, alias: str, pin: str, place: dict[str, Any], host: str, how: str,
                   seq: int | None) -> Payload:
    return {"collab": cid, "alias": alias, "pin": pin, "host": host, "how": how, "by": str(who),
            "where": place["where"], "tmux": {"socket": place["socket"], "target": place["target_window"],
                                              "window": place["window"], "pane": place["pane"]},
            "pid": place["pid"], "seq": seq, "task": None}


def _hand_task(ctx: Ctx, cid: str, who: Pin, alias: str, place: dict[str, Any], task: str) -> Payload:
    """The task as a request from the spawner (stored, in the transcript, shown inside the boundary), and the
    doorbell line typed into the new session's own pane so that its next prompt shows it."""
    from agentmsg.domain import wake

    first = task.strip().splitlines()[0] if task.strip() else "task"
    subject = "Task: " + (first[:150] + ("…" if len(first) > 150 else ""))
    sent = commands.send(ctx, collab=cid, self_flag=str(who),
                         draft=Draft(to=alias, subject=subject, body=task, kind=kinds.REQUEST))
    mid = str(sent["results"][0]["id"])
    line = wake.doorbell(1, alias, [mid])
    try:
        spawned.type_line(str(place["socket"]), str(place["pane"]), line)
        rang = "rang"
    except SpawnFailed as exc:
        rang = f"not rung ({exc}): it is shown at the session's next prompt"
    return {"id": mid, "subject": subject, "ring": rang}


# ---- kill ----------------------------------------------------------------------------------------------------


def kill(ctx: Ctx, *, collab: str | None, self_flag: str | None, alias: str, force: bool) -> Payload:
    """``agentmsg kill ALIAS``: a session agentmsg spawned by its window; any other only by a person, --force."""
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    alias = validate.alias(alias)
    found = spawn_of(ctx, cid, alias, ctx.store.registry(cid).holder(alias))
    if found is None or (force and not spawned.same_process(found.get("pid"), found.get("pid_start"))):
        # not spawned, or its spawned process ended and the session was restarted by hand: a person's --force,
        # through the host process its own hooks recorded
        return commands.kill(ctx, collab=cid, self_flag=self_flag, alias=alias, force=force)
    return kill_spawned(ctx, cid, who, alias, found)


def kill_spawned(ctx: Ctx, cid: str, who: Pin, alias: str, spawn_ev: dict[str, Any]) -> Payload:
    """Stop a session agentmsg spawned: its window closed, its process group ended, verified by pid and start
    time (a reused pid is never signalled); the alias stays, gone."""
    from agentmsg.errors import NotFound

    reg = ctx.store.registry(cid)
    pid = spawn_ev["pid"] if type(spawn_ev.get("pid")) is int else 0
    rules.kill_event(reg, who, alias, force=False, pid=pid, spawned=spawn_ev)  # refused before any signal
    try:
        ended = spawned.stop(spawn_ev)
    except LookupError as exc:
        raise NotFound(f"{alias}: {exc}; nothing was signalled (a session restarted by hand since: a human: pin "
                       "with --force stops it through the process its hooks recorded)") from None
    with ctx.store.transaction(cid) as tx:
        ev = tx.append_event(rules.kill_event(tx.registry(), who, alias, force=False, pid=pid, spawned=spawn_ev))
    return {"collab": cid, "alias": alias, "pin": ev["pin"], "pid": pid, "signal": ended, "by": str(who),
            "spawned": True, "where": spawn_ev.get("where"), "tmux": spawn_ev.get("target_window")}


def spawn_of(ctx: Ctx, cid: str, alias: str, pin: str | None) -> dict[str, Any] | None:
    """The ``spawned`` event of ``alias``'s current pin, if agentmsg started that session."""
    return rules.latest_spawn(ctx.store.events(cid), alias, pin) if pin else None
