#!/usr/bin/env python3
"""Issue 32 side by side: every prompt path, the idle paths and the CLI commands against the interpreter floor.

    .venv/bin/python bench/side_by_side.py [--repeats 20] [--write-md]

One process, round robin: each round runs the floor (the real interpreter started bare, ``python3 -S -c
pass``) and then every case once, so a machine that drifts drifts for all of them.  Every case is a whole
process as its caller starts it, and every state it changes is put back, untimed, before the next round:

* the hooks as Claude Code runs them (``sh -c`` with the command from ``hooks/hooks.json``, Claude's hook
  environment and stdin, rendering ahead on, the resident helper running for the root):
  ``prompt, nothing pending`` (the idle marker), ``PostToolUse, nothing due`` (the ``.mid`` marker), and the
  prompt with 20 messages pending ``rendered ahead``; ``render in flight`` (the 20th message sent, by this
  process, just before the prompt starts: the helper is rendering while the launcher looks);
  ``several bindings`` (10 pending in each of two collaborations); ``wake consent`` (an active consent, no
  wake-up pending); ``replica root`` (a replica of a file store elsewhere, its mirror ``agentmsg sync`` running,
  started by the session's SessionStart hook: it copies the mail down and renders);
* the CLI as an agent runs it: ``agentmsg send``, ``inbox`` and ``ack`` through the plugin's launcher
  (``bin/agentmsg``, its private environment ready) and through the console script (``.venv/bin/agentmsg``).

Wall time is the median; CPU is the process tree's user + system time (``getrusage`` of the children), which
the machine's load inflates less.  ``--write-md`` replaces the section "Issue 32: side by side" of
docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BENCH))

from hook_bench import TOOL_FIELDS, child_run, claude_env, resolve_interpreter, stdin_json  # noqa: E402
from store_bench import DRIVER, REVIEWER, Snapshot, machine, new_collab, write_section  # noqa: E402

from agentmsg.backends.file import ahead, layout  # noqa: E402
from agentmsg.backends.file.store import FileStore  # noqa: E402
from agentmsg.domain.values import Draft  # noqa: E402
from agentmsg.runtime import doorbell  # noqa: E402
from agentmsg.service.messaging import Mailbox  # noqa: E402

SECTION = "Issue 32: side by side"
PENDING = 20
PIN = str(REVIEWER)
SH = ["/bin/sh", "-c"]

Run = tuple[float, float, bytes]


def event_command(event: str) -> str:
    """The event's first command in ``hooks/hooks.json`` (PostToolUse's first is mid-turn delivery)."""
    return str(json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"][event][0]["hooks"][0]["command"])


def draft(i: int) -> Draft:
    return Draft(to="reviewer", kind="update", priority="normal", subject=f"pending {i}",
                 body=f"pending message {i}\nsecond line")


class Case:
    """One row: ``run`` times one process; ``check`` says what it must have printed; ``before`` and ``after``
    (untimed) set the state up and put it back."""

    def __init__(self, name: str, run: Callable[[], Run], check: Callable[[bytes], bool], *,
                 before: Callable[[], None] | None = None, after: Callable[[], None] | None = None,
                 kind: str = "hook") -> None:
        self.name, self.run, self.check, self.kind = name, run, check, kind
        self.before, self.after = before, after
        self.wall: list[float] = []
        self.cpu: list[float] = []


class Root:
    """A state root with the reviewer's Claude Code session (its facts recorded by a SessionStart run)."""

    def __init__(self, tmp: Path, name: str, data: Path, project: Path, *, collabs: int = 1,
                 make: bool = True) -> None:
        self.path = tmp / name
        self.collabs = [new_collab(self.path)[1]] if make else []
        self.box = Mailbox(FileStore(self.path, on_wake=doorbell.nudge))  # its sends ring the helper, as the CLI's do
        for i in range(1, collabs):
            reg = self.box.open(DRIVER, "driver", f"bench {i}", "benchmark", {"adapter": "hook"})
            self.box.join(reg.collab, REVIEWER, "reviewer")
            self.collabs.append(reg.collab)
        self.real = os.path.realpath(self.path)
        self.env = claude_env(self.path, data, project, ahead=True)
        self.env["AGENTMSG_NO_MIRROR"] = "1"
        self.stdin = stdin_json(project)
        self.at = ahead.base(self.real, PIN) or ""
        self.snaps: list[Snapshot] = []

    def hook(self, event: str = "UserPromptSubmit", stdin: bytes | None = None) -> Run:
        return child_run([*SH, event_command(event)], self.stdin if stdin is None else stdin, self.env)

    def start(self) -> None:
        """SessionStart: records the facts the helper renders from, and starts the helper."""
        doc = dict(json.loads(self.stdin), hook_event_name="SessionStart", source="startup")
        self.hook("SessionStart", json.dumps(doc).encode())

    def send(self, n: int, collab: str | None = None, first: int = 0) -> None:
        for i in range(first, first + n):
            self.box.send(collab or self.collabs[0], DRIVER, draft(i))

    def current(self) -> bool:
        return not os.path.lexists(self.at + ahead.TOOK) and ahead.current(self.real, PIN)

    def settle(self, timeout: float = 20.0) -> None:
        """Until the helper folded the last claim and has an answer for the current generation."""
        deadline = time.monotonic() + timeout
        while not self.current():
            if time.monotonic() > deadline:
                raise SystemExit(f"{self.path.name}: the helper never settled ({self.files()})")
            time.sleep(0.002)

    def files(self) -> list[str]:
        return sorted(os.listdir(os.path.dirname(self.at))) if self.at else []

    def snapshot(self, scratch: Path) -> None:
        """Everything the timed runs may change from here on is put back by :meth:`restore`."""
        self.snaps = [Snapshot(Path(self.box.store.base(c)), scratch / f"{self.path.name}-{i}")  # type: ignore[attr-defined]
                      for i, c in enumerate(self.collabs)]
        self.idle = {sfx: _read(self.at + sfx) for sfx in (".gen", ".idle", ".mid", ".stop", ".env", ".ready",
                                                            ".fold", ".took", ".full")}

    def restore(self) -> None:
        for snap in self.snaps:
            now = snap._stats()
            snap.changed = [p for p, st in now.items() if snap.before.get(p) != st]
            snap.restore()
        for sfx, data in self.idle.items():
            path = Path(self.at + sfx)
            if data is None:
                path.unlink(missing_ok=True)
            elif not path.exists() or path.read_bytes() != data:
                tmp = path.with_name(path.name + ".bench")
                tmp.write_bytes(data)
                tmp.replace(path)

    def helper(self) -> int | None:
        try:
            pid = int((Path(self.real) / layout.IDLE / ahead.PID).read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid


def _read(path: str) -> bytes | None:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        return None


def quoted(n: int) -> Callable[[bytes], bool]:
    def check(out: bytes) -> bool:
        try:
            text = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        except (ValueError, KeyError, TypeError):
            return False
        return f"{n} quoted below" in text
    return check


def empty(out: bytes) -> bool:
    return out == b""


def prompt_cases(tmp: Path, data: Path, project: Path) -> tuple[list[Case], list[Root]]:
    scratch = tmp / "pristine"
    scratch.mkdir()
    roots: list[Root] = []
    cases: list[Case] = []

    # Nothing pending: the idle marker; PostToolUse with mid-turn delivery on and nothing due: the .mid marker.
    idle = Root(tmp, "idle", data, project)
    from agentmsg.service import delivery

    delivery.set_midturn(idle.box.store, idle.collabs[0], REVIEWER, on=True)
    idle.start()
    idle.hook()
    tool_in = json.dumps(json.loads(idle.stdin) | {"hook_event_name": "PostToolUse"} | TOOL_FIELDS).encode()
    idle.hook("PostToolUse", tool_in)
    roots.append(idle)
    cases.append(Case("prompt, nothing pending", idle.hook, empty, kind="idle"))
    cases.append(Case("PostToolUse, nothing due", lambda: idle.hook("PostToolUse", tool_in), empty, kind="idle"))

    def served(root: Root, name: str, n: int = PENDING) -> Case:
        root.settle()
        root.snapshot(scratch)
        roots.append(root)

        def after() -> None:
            root.settle()  # the helper folds the claim and renders the next prompt, untimed
            root.restore()
        return Case(name, root.hook, quoted(n), after=after)

    # 20 pending, rendered ahead.
    ready = Root(tmp, "ready", data, project)
    ready.start()
    ready.send(PENDING)
    cases.append(served(ready, "prompt, 20 pending, rendered ahead"))

    # For comparison: the full Python hook, which every one of these paths ran before (rendering ahead off).
    full = Root(tmp, "full", data, project)
    full.env["AGENTMSG_NO_AHEAD"] = "1"
    full.start()
    full.send(PENDING)
    full.snapshot(scratch)
    roots.append(full)
    cases.append(Case("prompt, 20 pending, full hook (for comparison)", full.hook, quoted(PENDING),
                      after=full.restore, kind="ref"))

    # Render in flight: 19 pending and rendered; the 20th is sent just before the prompt starts.
    flight = Root(tmp, "flight", data, project)
    flight.start()
    flight.send(PENDING - 1)
    flight.settle()
    flight.snapshot(scratch)
    roots.append(flight)

    def flight_after() -> None:
        flight.settle()
        flight.restore()
        flight.settle()
    cases.append(Case("prompt, 20 pending, render in flight", flight.hook, quoted(PENDING),
                      before=lambda: flight.send(1, first=PENDING - 1), after=flight_after))

    # Several bindings: 10 pending in each of two collaborations.
    binds = Root(tmp, "binds", data, project, collabs=2)
    binds.start()
    for collab in binds.collabs:
        binds.send(PENDING // 2, collab)
    cases.append(served(binds, "prompt, 20 pending, several bindings"))

    # An active wake consent (no wake-up pending, no wake in a row): the prompt counts the turn.
    wake = Root(tmp, "wake", data, project)
    wake.start()
    from agentmsg.service import wake as wakes

    wakes.on(wake.box.store, wake.real, wake.collabs[0], REVIEWER, wake.env)
    wake.send(PENDING)
    cases.append(served(wake, "prompt, 20 pending, wake consent"))

    # A replica root: a file store elsewhere is the server; its mirror (`agentmsg sync`, started by the session's
    # SessionStart hook) copies the mail down and renders.  Each round, untimed: the last round's 20 acknowledged
    # and 20 new ones sent on the server, then the wait for the mirror's delivery naming the newest.
    remote = tmp / "server"
    _rbox, rcollab = new_collab(remote)
    server = Mailbox(FileStore(remote))
    url = f"file://{remote}"
    cli = str(Path(sys.prefix) / "bin" / "agentmsg")
    rep = Root(tmp, "replica", data, project, make=False)
    rep.env.pop("AGENTMSG_NO_MIRROR")
    rep.env.update(AGENTMSG_STORE=url, AGENTMSG_CLI=cli, AGENTMSG_SYNC_IDLE_EXIT="3600s")
    sync = subprocess.run([cli, "sync", "--once"], env=dict(rep.env), capture_output=True)
    if sync.returncode:
        raise SystemExit(f"agentmsg sync --once: {sync.stderr[-300:]!r}")
    rep.start()  # the full SessionStart hook starts the mirror
    sent: list[str] = []

    def rep_before() -> None:
        if sent:
            server.ack(rcollab, REVIEWER, sent)
        sent[:] = [server.send(rcollab, DRIVER, draft(i))[0].message.id for i in range(PENDING)]
        deadline = time.monotonic() + 30
        while not (rep.current() and sent[-1].encode() in (_read(rep.at + ahead.READY) or b"")):
            if time.monotonic() > deadline:
                raise SystemExit(f"replica: the mirror rendered nothing ({rep.files()})")
            time.sleep(0.002)

    roots.append(rep)
    cases.append(Case("prompt, 20 pending, replica root", rep.hook, quoted(PENDING), before=rep_before,
                      after=rep.settle))
    return cases, roots


def cli_cases(tmp: Path) -> tuple[list[Case], list[Snapshot]]:
    """send, inbox, ack through bin/agentmsg and through the console script, on a root of their own."""
    root = tmp / "cli"
    box, collab = new_collab(root)
    sent = box.send(collab, DRIVER, draft(0))
    mid = sent[0].message.id
    # bin/agentmsg's private environment, ready: this checkout's virtual environment's packages.
    xdg = tmp / "xdg"
    venv = xdg / "agentmsg" / "venv"
    (venv / "bin").mkdir(parents=True)
    real = Path(sys.prefix)
    shutil.copy(real / "pyvenv.cfg", venv / "pyvenv.cfg")
    os.symlink(os.path.realpath(real / "bin" / "python"), venv / "bin" / "python")
    os.symlink(real / "lib", venv / "lib")
    (venv / ".agentmsg-ready").touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMSG_", "CLAUDE", "CODEX", "PYTHON"))}
    env.update(AGENTMSG_HOME=str(root), XDG_DATA_HOME=str(xdg), TERM="dumb", HOME=str(tmp))
    snap = Snapshot(Path(box.store.base(collab)), tmp / "pristine-cli")  # type: ignore[attr-defined]
    snap.changed = list(snap._stats())
    commands = {
        "send": ["send", "--collab", collab, "--self", str(DRIVER), "--to", "reviewer", "--subject", "s",
                 "--body", "b"],
        "inbox": ["inbox", "--collab", collab, "--self", PIN],
        "ack": ["ack", mid, "--collab", collab, "--self", PIN],
    }
    cases = []
    for how, argv0 in (("plugin launcher", [str(REPO / "bin" / "agentmsg")]),
                       ("console script", [str(Path(sys.prefix) / "bin" / "agentmsg")])):
        for name, args in commands.items():
            def run(argv: tuple[str, ...] = (*argv0, *args)) -> Run:
                return child_run(list(argv), None, env)

            def after() -> None:
                now = snap._stats()
                snap.changed = [p for p, st in now.items() if snap.before.get(p) != st]
                snap.restore()
            cases.append(Case(f"`agentmsg {name}` ({how})", run, lambda out: True, after=after, kind="cli"))
    return cases, [snap]


def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="side-by-side-"))
    roots: list[Root] = []
    try:
        project = tmp / "project"
        project.mkdir()
        data = tmp / "plugin-data"
        new_collab(tmp / "probe")
        python, _cold = resolve_interpreter(data, project, tmp / "probe")
        cases, roots = prompt_cases(tmp, data, project)
        more, _snaps = cli_cases(tmp)
        cases += more
        print(f"built {len(cases)} cases", flush=True)
        floor_w: list[float] = []
        floor_c: list[float] = []
        for i in range(args.warmup + args.repeats):
            fw, fc, _ = child_run([python, "-S", "-c", "pass"], None)
            for case in cases:
                if case.before is not None:
                    case.before()
                wall, cpu, out = case.run()
                if case.after is not None:
                    case.after()
                if not case.check(out):
                    raise SystemExit(f"{case.name}: round {i} printed {out[:300]!r}")
                if i >= args.warmup:
                    case.wall.append(wall)
                    case.cpu.append(cpu)
            if i >= args.warmup:
                floor_w.append(fw)
                floor_c.append(fc)
        fw, fc = statistics.median(floor_w), statistics.median(floor_c)
        rows = []
        for case in cases:
            w, c = statistics.median(case.wall), statistics.median(case.cpu)
            rows.append({"case": case.name, "kind": case.kind, "ms": w * 1e3, "ratio": w / fw, "cpu_ms": c * 1e3,
                         "cpu_ratio": c / fc if fc else 0.0})
            print(f"{case.name:>48}: {w * 1e3:7.2f} ms = {w / fw:5.2f}x  (CPU {c * 1e3:6.2f} ms = "
                  f"{c / fc if fc else 0:5.2f}x)", flush=True)
        print(f"{'floor':>48}: {fw * 1e3:7.2f} ms  (CPU {fc * 1e3:.2f} ms)")
        return {"rows": rows, "floor_ms": fw * 1e3, "floor_cpu_ms": fc * 1e3, "repeats": args.repeats,
                "python": python, "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    finally:
        for root in roots:
            pid = root.helper()
            if pid is not None and pid != os.getpid():
                os.kill(pid, 15)
        shutil.rmtree(tmp, ignore_errors=True)


def markdown(res: dict[str, Any], info: dict[str, str], command: str) -> str:
    lines = [f"## {SECTION}", "", f"Reproduce: `{command}`", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    lines += ["",
              "One process, round robin: each round runs the floor (`python3 -S -c pass`, the real interpreter",
              "started bare) and then every case once, each a whole process as its caller starts it; whatever a",
              "case changed is put back, untimed, before the next round. The hooks run as Claude Code runs them",
              "(`sh -c` with the command from `hooks/hooks.json`, its hook environment and stdin), rendering ahead",
              "on and the resident helper running for the root. 20 pending: 20 new messages, all quoted. Full hook:",
              "rendering ahead off, what every one of these paths cost before (the prompt hook as a Python",
              "process). Render in flight: the 20th is sent by the bench just before the prompt starts, so the",
              "helper renders while the launcher looks. Several bindings: 10 pending in each of two collaborations.",
              "Wake consent: an active consent with no wake-up pending. Replica root: a replica of a file store",
              "elsewhere, its mirror (`agentmsg sync`) running: each round the last 20 are acknowledged and 20 new",
              "ones sent on the server, untimed, and the mirror copies them down and renders. The CLI rows run",
              "`agentmsg send`, `inbox` and `ack` through the plugin's launcher (`bin/agentmsg`, its private",
              "environment ready) and through the console script (`.venv/bin/agentmsg`), on a root of their own,",
              "with no thin client yet (issue 32's item 1). CPU is the process tree's user + system time.",
              f"Median of {res['repeats']} rounds; floor {res['floor_ms']:.2f} ms (CPU {res['floor_cpu_ms']:.2f} ms);"
              f" load after: {res['load_after']}.", "",
              "| case | median | vs floor | CPU | CPU vs floor | target |", "|---|---:|---:|---:|---:|---|"]
    for r in res["rows"]:
        target = {"idle": 0.3, "hook": 1.5}.get(r["kind"])
        if r["kind"] == "cli":
            target = 1.5 if "plugin" in r["case"] else 2.0
        verdict = f"≤ {target}x: {'met' if r['ratio'] <= target else 'missed'}" if target else ""
        lines.append(f"| {r['case']} | {r['ms']:.2f} ms | **{r['ratio']:.2f}x** | {r['cpu_ms']:.2f} ms | "
                     f"{r['cpu_ratio']:.2f}x | {verdict} |")
    lines += ["",
              "Before issue 32 the render-in-flight, several-bindings, wake-consent and replica-root prompts ran",
              "the full hook (the comparison row). Now a session with several bindings, or an active wake consent",
              "with no wake-up pending, is rendered ahead like one binding; a replica root is rendered by its",
              "mirror; and a prompt that comes while the helper renders waits for it, at most five short sleeps",
              "(docs/DELIVERY.md, 'A render in flight'). What still runs the full hook: a wake consent with a ring",
              "unanswered or wakes in a row, a typed message's artifacts, collision notices or claims news, and a",
              "render that takes longer than the wait (then the wait is paid on top). The CLI rows wait for the",
              "thin client (item 1)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--write-md", action="store_true", help=f"replace the ## {SECTION} section of docs/BENCHMARKS.md")
    args = ap.parse_args()
    info = machine()  # the load at the start
    res = run(args)
    if args.write_md:
        command = f".venv/bin/python bench/side_by_side.py --repeats {args.repeats} --write-md"
        write_section(REPO / "docs" / "BENCHMARKS.md", SECTION, markdown(res, info, command))


if __name__ == "__main__":
    main()
