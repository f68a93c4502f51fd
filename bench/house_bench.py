#!/usr/bin/env python3
"""Two checkouts side by side: the hook and the send of this one against an earlier commit, in one run.

    git worktree add /tmp/agentmsg-old 798b9d2        # the commit to compare with
    .venv/bin/python bench/house_bench.py --old /tmp/agentmsg-old [--repeats 30] [--write-md]

Whole processes, round robin (old, new, floor, old, new, floor, ...), so a machine that drifts drifts for
both.  Each process is what a host or an agent runs:

* ``prompt, 20 pending, full hook``: ``hooks/run claude prompt`` of each checkout (its ``hooks.json``
  command, Claude Code's hook environment, rendering ahead off) on one state root whose reviewer has 20
  unread messages; every file the run changed is put back before the next one, so each run presents the
  same 20 messages for the first time.
* ``prompt, nothing pending``: the same hook for a session with nothing unread, after a first run left its
  idle marker (the launcher's fast path: no interpreter).
* ``agentmsg send``: ``python -m agentmsg.cli send`` of each checkout, as an agent runs it.
* the floor: ``python3 -S -c pass``.

And the in-process send bar of each checkout (``bench/store_bench.py --sends N``: a durable send over a
bare append+fsync of the same bytes), run alternately.  ``--write-md`` replaces the ``## The house, side
by side`` section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BENCH))

from hook_bench import child_run  # noqa: E402
from store_bench import DRIVER, REVIEWER, Snapshot, build_unread, machine, write_section  # noqa: E402

SECTION = "The house, side by side"
IDLE_SESSION = "5418c0de-1111-4222-8333-00000000d1e0"


def hook_command(checkout: Path) -> str:
    (group,) = json.loads((checkout / "hooks" / "hooks.json").read_text())["hooks"]["UserPromptSubmit"]
    return str(group["hooks"][0]["command"])


def hook_env(checkout: Path, root: Path, data: Path, project: Path, session: str) -> dict[str, str]:
    return {"HOME": str(project), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
            "AGENTMSG_HOME": str(root), "CLAUDE_PLUGIN_ROOT": str(checkout), "CLAUDE_PLUGIN_DATA": str(data),
            "CLAUDE_PROJECT_DIR": str(project), "CLAUDE_CODE_SESSION_ID": session, "CLAUDECODE": "1",
            "AGENTMSG_NO_AHEAD": "1", "AGENTMSG_NO_MIRROR": "1"}


def prompt_stdin(project: Path, session: str) -> bytes:
    return json.dumps({"session_id": session, "transcript_path": str(project / "t.jsonl"), "cwd": str(project),
                       "hook_event_name": "UserPromptSubmit", "prompt": "carry on"}).encode()


CPU: dict[str, dict[str, list[float]]] = {}  # case -> checkout -> the process's user + system seconds


def once(argv: list[str], stdin: bytes | None = None, env: dict[str, str] | None = None,
         cpu: list[float] | None = None) -> tuple[float, bytes]:
    """(wall seconds, stdout) of one whole process (``hook_bench.child_run``); its CPU time (user + system,
    which load inflates less than wall time) goes to ``cpu``."""
    wall, used, out = child_run(argv, stdin, env)
    if cpu is not None:
        cpu.append(used)
    return wall, out


def send_ratio(checkout: Path, sends: int) -> float:
    """One run of that checkout's own store bench: its send over a bare append+fsync."""
    out = subprocess.run([sys.executable, str(checkout / "bench" / "store_bench.py"), "--sends", str(sends),
                          "--unread", "10", "--repeats", "3"], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(checkout)}).stdout
    found = re.search(r"^send .*: ([0-9.]+)x \(p10", out, re.M)
    if found is None:
        raise SystemExit(f"no send line from {checkout}'s store bench:\n{out[-600:]}")
    return float(found.group(1))


def run(args: argparse.Namespace) -> dict[str, object]:
    old, new = Path(args.old).resolve(), REPO
    tmp = Path(tempfile.mkdtemp(prefix="house-bench-"))
    try:
        project, data = tmp / "project", tmp / "data"
        project.mkdir()
        data.mkdir()
        root = tmp / "root"
        build_unread(root, 20)
        collab = next(p for p in (root / "collabs").iterdir())
        snap = Snapshot(collab, tmp / "pristine")
        stdin, idle_stdin = prompt_stdin(project, REVIEWER.session), prompt_stdin(project, IDLE_SESSION)
        floor = [sys.executable, "-S", "-c", "pass"]
        cases: dict[str, dict[str, list[float]]] = {}
        for checkout in (old, new):  # warm: compiled modules, the launcher's interpreter cache, the idle marker
            for session, data_in in ((REVIEWER.session, stdin), (IDLE_SESSION, idle_stdin)):
                env = hook_env(checkout, root, data, project, session)
                for _ in range(2):
                    snap.record(lambda env=env, data_in=data_in, checkout=checkout: once(
                        ["/bin/sh", "-c", hook_command(checkout)], data_in, env))
        sent = 0
        for _ in range(args.repeats):
            for name, checkout in (("old", old), ("new", new)):
                full_env = hook_env(checkout, root, data, project, REVIEWER.session)
                cpu = CPU.setdefault("prompt, 20 pending, full hook", {}).setdefault(name, [])
                wall, out = snap.record(lambda checkout=checkout, env=full_env, cpu=cpu: once(
                    ["/bin/sh", "-c", hook_command(checkout)], stdin, env, cpu))
                assert out, "the full hook printed nothing"
                cases.setdefault("prompt, 20 pending, full hook", {}).setdefault(name, []).append(wall)
                idle_env = hook_env(checkout, root, data, project, IDLE_SESSION)
                wall, out = once(["/bin/sh", "-c", hook_command(checkout)], idle_stdin, idle_env,
                                 CPU.setdefault("prompt, nothing pending", {}).setdefault(name, []))
                cases.setdefault("prompt, nothing pending", {}).setdefault(name, []).append(wall)
                cli_env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AGENTMSG_", "CLAUDE",
                                                                                         "CODEX"))},
                           "PYTHONPATH": str(checkout), "AGENTMSG_HOME": str(root), "AGENTMSG_NO_MIRROR": "1"}
                sent += 1
                cpu = CPU.setdefault("agentmsg send (process)", {}).setdefault(name, [])
                wall, _ = snap.record(lambda env=cli_env, i=sent, cpu=cpu: once(
                    [sys.executable, "-m", "agentmsg.cli", "send", "--self", str(DRIVER),
                     "--to", "reviewer", "--subject", f"s{i}", "--body", "b"], None, env, cpu))
                cases.setdefault("agentmsg send (process)", {}).setdefault(name, []).append(wall)
            cases.setdefault("floor", {}).setdefault("floor", []).append(once(floor)[0])
        sends: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(args.send_runs):
            for name, checkout in (("old", old), ("new", new)):
                sends[name].append(send_ratio(checkout, args.sends))
        floor_ms = statistics.median(cases.pop("floor")["floor"]) * 1e3
        rows = []
        for case, runs in cases.items():
            o, n = statistics.median(runs["old"]) * 1e3, statistics.median(runs["new"]) * 1e3
            pairs = statistics.median(b / a for a, b in zip(runs["old"], runs["new"], strict=True))
            co, cn = (statistics.median(CPU[case][k]) * 1e3 for k in ("old", "new"))
            rows.append({"case": case, "old_ms": o, "new_ms": n, "old_x": o / floor_ms, "new_x": n / floor_ms,
                         "new_over_old": pairs, "old_cpu_ms": co, "new_cpu_ms": cn})
        return {"floor_ms": floor_ms, "rows": rows, "sends": sends, "repeats": args.repeats,
                "old": subprocess.run(["git", "-C", str(old), "rev-parse", "--short", "HEAD"], capture_output=True,
                                      text=True).stdout.strip(),
                "new": subprocess.run(["git", "-C", str(new), "rev-parse", "--short", "HEAD"], capture_output=True,
                                      text=True).stdout.strip()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def markdown(res: dict[str, object], info: dict[str, str], command: str) -> str:
    rows = res["rows"]
    sends = res["sends"]
    assert isinstance(rows, list) and isinstance(sends, dict)
    lines = [
        f"## {SECTION}",
        "",
        f"Before and after the house issue's moves: `{res['old']}` (old) against `{res['new']}` (new), whole "
        f"processes in one run, round robin, {res['repeats']} runs each; the floor is `python3 -S -c pass` "
        f"({res['floor_ms']:.1f} ms median in this run).",
        "",
        "| case | old | new | old / floor | new / floor | new / old (median of pairs) | CPU old | CPU new |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['case']} | {r['old_ms']:.1f} ms | {r['new_ms']:.1f} ms | {r['old_x']:.2f}x | "
                     f"{r['new_x']:.2f}x | {r['new_over_old']:.2f} | {r['old_cpu_ms']:.1f} ms | "
                     f"{r['new_cpu_ms']:.1f} ms |")
    lines += ["", "The in-process send bar (a durable send over a bare append+fsync of the same bytes), each "
              "checkout's own `bench/store_bench.py`, run alternately:", "",
              f"- old: {', '.join(f'{x:.2f}x' for x in sends['old'])}",
              f"- new: {', '.join(f'{x:.2f}x' for x in sends['new'])}", "",
              f"Machine: {info.get('cpu', '?')}; {info.get('python', '?')}.  Re-run: `{command}`."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", required=True, help="a checkout of the commit to compare with (git worktree add)")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--sends", type=int, default=500, help="sends per store bench run")
    ap.add_argument("--send-runs", type=int, default=3, help="store bench runs per checkout")
    ap.add_argument("--write-md", action="store_true")
    args = ap.parse_args()
    info = machine()
    res = run(args)
    command = f".venv/bin/python bench/house_bench.py --old OLD --repeats {args.repeats} --write-md"
    text = markdown(res, info, command)
    print(text)
    if args.write_md:
        write_section(REPO / "docs" / "BENCHMARKS.md", SECTION, text)


if __name__ == "__main__":
    main()
