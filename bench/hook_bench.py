#!/usr/bin/env python3
"""Hook and ack benchmark: whole processes, flat from 10 to 100,000 unread, and the interpreter floor.

    .venv/bin/python bench/hook_bench.py [--repeats 40] [--unread 10,10000,100000] [--write-md]
    .venv/bin/python bench/hook_bench.py --hosts [--write-md]   # each host's hook command (Claude, Codex,
                                                                # Gemini, Copilot), as that host runs it

Each hook run is exactly what Claude Code does on a prompt: the command from
``hooks/hooks.json`` (the ``hooks/run`` launcher) through ``sh -c``, with
Claude's hook environment (``CLAUDE_PLUGIN_ROOT``, ``CLAUDE_PLUGIN_DATA``,
``CLAUDE_PROJECT_DIR``, ``CLAUDE_CODE_SESSION_ID``, the caller's ``PATH``) and
Claude's stdin JSON.  Each ack run is ``agentmsg ack --message ID --json`` as
a process of its own (``python -m agentmsg.cli``), acknowledging the newest
message.

Scenarios: 10, 10,000 and 100,000 unread messages in reviewer's inbox, built
by ``store_bench.build_unread`` (records written in bulk in the exact on-disk
format, the last 10 sent by the store, whose first id lookup rebuilds the id
index, then one untimed read that folds the inbox map once).  Before every
timed run the files the previous run changed (receipts, the journal's head
sidecar, the inbox map, id index entries, the hook's state) are put back, so
every hook run presents the same 20 messages for the first time and every
ack run acknowledges the same message for the first time.

Reported as ratios measured in the same run: each figure vs the 10-unread
figure (target: at most 1.3x), and the hook vs the floor, the real
interpreter started bare (``-S -c pass``), interleaved with the runs.  It
also times the version-manager shim (when ``python3`` on PATH is one) and
the hook path's import time (``-X importtime``).  ``--write-md`` replaces
the ``## Hook`` section of docs/BENCHMARKS.md.
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
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BENCH))

from store_bench import (  # noqa: E402
    DRIVER,
    REVIEWER,
    Draft,
    Snapshot,
    build_unread,
    machine,
    new_collab,
    write_section,
)

SESSION = REVIEWER.session


def hook_command() -> str:
    (group,) = json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"]["UserPromptSubmit"]
    return group["hooks"][0]["command"]


def claude_env(root: Path, data: Path, project: Path, *, ahead: bool = False) -> dict[str, str]:
    """Claude Code's hook environment.  Rendering ahead off (``AGENTMSG_NO_AHEAD=1``) unless asked: these
    benchmarks time the hook's own work, which is what a prompt costs before anything is rendered ahead."""
    env = {"HOME": os.environ.get("HOME", str(project)), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "LANG": os.environ.get("LANG", "C.UTF-8"), "AGENTMSG_HOME": str(root),
           "CLAUDE_PLUGIN_ROOT": str(REPO), "CLAUDE_PLUGIN_DATA": str(data), "CLAUDE_PROJECT_DIR": str(project),
           "CLAUDE_CODE_SESSION_ID": SESSION, "CLAUDECODE": "1"}
    if not ahead:
        env["AGENTMSG_NO_AHEAD"] = "1"
    return env


def cli_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMSG_", "CLAUDE", "CODEX"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed CLI runs from compiled modules
    env.update(PYTHONPATH=str(REPO), AGENTMSG_HOME=str(root))
    return env


def stdin_json(project: Path) -> bytes:
    return json.dumps({"session_id": SESSION, "transcript_path": str(project / "t.jsonl"), "cwd": str(project),
                       "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
                       "prompt": "carry on with the review", "prompt_id": "p-1"}).encode()


def timed(argv: list[str], **kw) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, **kw)
    return time.perf_counter() - t0, proc


def stats(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def resolve_interpreter(data: Path, project: Path, root: Path) -> tuple[str, float]:
    """Run the launcher once with a cold cache (it resolves python3 and caches it); returns (path, seconds)."""
    env = claude_env(root, data, project)
    seconds, proc = timed(["/bin/sh", "-c", hook_command()], input=stdin_json(project), env=env)
    if proc.returncode or proc.stderr:
        raise SystemExit(f"hook failed: rc={proc.returncode} {proc.stderr[-500:]!r}")
    return (data / "python3-path").read_text().strip(), seconds


def import_time(python: str) -> dict[str, int]:
    """Cumulative microseconds for the hook path's imports, and for the full store for comparison."""
    out = {}
    for module in ("agentmsg.hooks.entry", "agentmsg.backends.file.store"):
        code = f"import sys; sys.path.insert(0, {str(REPO)!r}); import {module}"
        best = None
        for _ in range(7):
            err = subprocess.run([python, "-I", "-S", "-X", "importtime", "-c", code], capture_output=True,
                                 text=True).stderr
            total = next(int(ln.split("|")[1]) for ln in err.splitlines() if ln.rstrip().endswith(f"| {module}"))
            best = total if best is None else min(best, total)
        out[module] = best or 0
    return out


def run(args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="hook-bench-"))
    try:
        project = tmp / "project"
        project.mkdir()
        data = tmp / "plugin-data"
        on_path = shutil.which("python3") or "python3"
        new_collab(tmp / "probe")
        python, cold = resolve_interpreter(data, project, tmp / "probe")
        results = {"python": python, "python3_on_path": on_path, "cold_first_run_ms": cold * 1e3,
                   "imports_us": import_time(python), "rows": [], "repeats": args.repeats}
        ack_cmd = [sys.executable, "-m", "agentmsg.cli", "ack"]
        def hook(sc: dict) -> tuple[float, str]:
            h, proc = timed(["/bin/sh", "-c", hook_command()], input=stdin_json(project), env=sc["env"])
            if proc.returncode or proc.stderr or not proc.stdout:
                raise SystemExit(f"hook failed: rc={proc.returncode} {proc.stderr[-500:]!r} {proc.stdout[:200]!r}")
            return h, json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]

        def ack(sc: dict) -> float:
            a, proc = timed(sc["ack"], env=sc["aenv"])
            doc = json.loads(proc.stdout or b"{}")
            if proc.returncode or not doc.get("ok") or doc["result"]["already"]:
                raise SystemExit(f"ack failed: rc={proc.returncode} {proc.stderr[-500:]!r} {proc.stdout[:300]!r}")
            return a

        scen = []
        for unread in args.unread:  # build every inbox first: the timed runs are interleaved across them
            root = tmp / f"u{unread}"
            t0 = time.perf_counter()
            box, collab, base, _timings = build_unread(root, unread)
            build_s = time.perf_counter() - t0
            (newest,) = box.store.since(collab, "reviewer", unread - 1)
            sc = {"unread": unread, "base": base, "build_s": build_s, "env": claude_env(root, data, project),
                  "ack": [*ack_cmd, "--collab", collab, "--self", str(REVIEWER), "--message", newest.id, "--json"],
                  "aenv": cli_env(root), "hooks": [], "acks": []}
            sc["snap_hook"] = Snapshot(base, tmp / f"pristine-{unread}")
            sc["shown"] = sc["snap_hook"].record(lambda sc=sc: hook(sc))[1]
            sc["snap_ack"] = Snapshot(base, tmp / f"pristine-ack-{unread}")
            sc["snap_ack"].record(lambda sc=sc: ack(sc))
            scen.append(sc)
            print(f"built {unread:,} unread in {build_s:.1f}s", flush=True)


        floor: list[float] = []
        for i in range(args.repeats + args.warmup):
            f, _ = timed([python, "-S", "-c", "pass"])
            for sc in scen:
                sc["snap_hook"].restore()
                h, text = hook(sc)
                sc["snap_hook"].restore()
                a = ack(sc)
                sc["snap_ack"].restore()
                if len(text) != len(sc["shown"]):
                    raise SystemExit(f"unread {sc['unread']}: run {i} showed something else")
                if i >= args.warmup:
                    sc["hooks"].append(h)
                    sc["acks"].append(a)
            if i >= args.warmup:
                floor.append(f)
        fm = stats(floor)[0]
        results["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        for sc in scen:
            (hm, hp), (am, ap) = stats(sc["hooks"]), stats(sc["acks"])
            results["rows"].append({"unread": sc["unread"], "hook_median_ms": hm * 1e3, "hook_p90_ms": hp * 1e3,
                                    "ack_median_ms": am * 1e3, "ack_p90_ms": ap * 1e3, "floor_median_ms": fm * 1e3,
                                    "ratio": hm / fm, "build_s": sc["build_s"], "shown_chars": len(sc["shown"]),
                                    "restored": sorted({str(p.relative_to(sc["base"])).split("/")[0]
                                                        for p in sc["snap_hook"].changed + sc["snap_ack"].changed})})
            print(f"unread {sc['unread']:>7,}: hook {hm * 1e3:6.2f} ms (p90 {hp * 1e3:6.2f})  ack {am * 1e3:6.2f} ms "
                  f"(p90 {ap * 1e3:6.2f})  floor {fm * 1e3:5.2f} ms  hook/floor {hm / fm:.2f}x", flush=True)
        if os.path.realpath(on_path) != os.path.realpath(python):
            env = claude_env(tmp / "probe", data, project)
            shim = [timed([on_path, "-S", "-c", "pass"])[0] for _ in range(args.shim_repeats)]
            naive = [timed(["/bin/sh", "-c", f'python3 -I -S "{REPO}/hooks/agentmsg_hook.py" claude'],
                           input=stdin_json(project), env=env)[0] for _ in range(args.shim_repeats)]
            results["shim"] = {"median_ms": stats(shim)[0] * 1e3, "p90_ms": stats(shim)[1] * 1e3,
                               "naive_hook_median_ms": stats(naive)[0] * 1e3}
        return results
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def markdown(res: dict, info: dict[str, str], command: str) -> str:
    lines = ["## Hook and ack", "", f"Reproduce: `{command}`", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    lines += [f"- real interpreter (cached by `hooks/run`): `{res['python']}`",
              f"- `python3` on PATH: `{res['python3_on_path']}`", ""]
    rows = res["rows"]
    first = rows[0]
    lines += [
        "Hook: UserPromptSubmit as Claude Code runs it: `sh -c` with the command from `hooks/hooks.json`",
        f"(`{hook_command()}`), Claude's hook environment and stdin, and `AGENTMSG_NO_AHEAD=1`: the full",
        "Python hook, what must stay flat in the backlog (rendered ahead, the launcher prints the delivery",
        "without it: \"Issue 15\" below). Every run presents the same 20",
        "messages for the first time (presented receipts appended, not fsynced, id index entries pointed at",
        "them, boundary rendering, then the completion receipt). Ack: `python -m agentmsg.cli ack --message ID",
        "--json`, a whole process, acknowledging the newest message for the first time. Before each run the",
        "files the previous one changed are put back (" + ", ".join(f"`{d}`" for d in rows[-1]["restored"]) + ").",
        "Inboxes are built by `store_bench.build_unread`: records written in bulk in the exact on-disk format,",
        "the last 10 sent by the store (its first id lookup rebuilds `ids/`), and one untimed read that folds",
        "the inbox map once: nothing timed pays for a first fold. All three inboxes are built first and the",
        "runs interleaved (each round: floor, then hook and ack at every size), so every size sees the same",
        "load. Floor: the real interpreter started bare (`-S -c pass`), once per round. Median and p90 of",
        f"{res['repeats']} runs each. Load average after the runs: {res['load_after']}.", "",
        f"| unread | hook median | hook p90 | hook vs {first['unread']:,} | ack median | ack p90 | "
        f"ack vs {first['unread']:,} | floor median | hook vs floor |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['unread']:,} | {r['hook_median_ms']:.2f} ms | {r['hook_p90_ms']:.2f} ms | "
                     f"**{r['hook_median_ms'] / first['hook_median_ms']:.2f}x** | {r['ack_median_ms']:.2f} ms | "
                     f"{r['ack_p90_ms']:.2f} ms | **{r['ack_median_ms'] / first['ack_median_ms']:.2f}x** | "
                     f"{r['floor_median_ms']:.2f} ms | {r['ratio']:.2f}x |")
    worst_h = max(r["hook_median_ms"] for r in rows) / first["hook_median_ms"]
    worst_a = max(r["ack_median_ms"] for r in rows) / first["ack_median_ms"]
    lines += ["", f"Target: each within 1.3x of the {first['unread']:,}-unread figure. Worst: hook {worst_h:.2f}x "
                  f"({'met' if worst_h <= 1.3 else 'MISSED'}), ack {worst_a:.2f}x "
                  f"({'met' if worst_a <= 1.3 else 'MISSED'})."]
    imp = res["imports_us"]
    lines += ["", "### Import time (`python3 -I -S -X importtime`, best of 7)", "",
              "| module | cumulative |", "|---|---:|",
              f"| `agentmsg.hooks.entry` (everything a hook imports) | {imp['agentmsg.hooks.entry'] / 1e3:.2f} ms |",
              f"| `agentmsg.backends.file.store` (the file backend) | "
              f"{imp['agentmsg.backends.file.store'] / 1e3:.2f} ms |"]
    lines += ["", "### Version-manager shims", ""]
    by = rows[0]["hook_median_ms"]
    if "shim" in res:
        s = res["shim"]
        lines += [
            "| what | median |", "|---|---:|",
            f"| `python3 -S -c pass` through the shim on PATH | {s['median_ms']:.1f} ms |",
            f"| a naive hook command, `python3 -I -S hooks/agentmsg_hook.py claude`, through the shim |"
            f" {s['naive_hook_median_ms']:.1f} ms |",
            f"| `hooks/run` on its first run (cold cache: asks `python3` once for `sys.executable`) |"
            f" {res['cold_first_run_ms']:.1f} ms |",
            f"| `hooks/run` afterwards (cached real interpreter; table above, {first['unread']} unread) |"
            f" {by:.1f} ms |", "",
            "The launcher pays the shim once, when it caches the real interpreter in the plugin's data folder;",
            "every later prompt execs the cached path directly.",
        ]
    else:
        lines += ["`python3` on PATH is not a shim on this machine; the launcher's first run (cold cache) took "
                  f"{res['cold_first_run_ms']:.1f} ms."]
    return "\n".join(lines) + "\n"


WATCHER = "7a7c0de0-1111-4222-8333-944455556666"  # a third, Claude Code participant with nothing pending


def fastpath_run(args: argparse.Namespace) -> dict:
    """The launcher's fast path: UserPromptSubmit and Stop with nothing pending, no interpreter started."""
    from agentmsg.backends.file import idindex
    from agentmsg.domain import validate

    tmp = Path(tempfile.mkdtemp(prefix="hook-fast-"))
    try:
        project = tmp / "project"
        project.mkdir()
        data = tmp / "plugin-data"
        new_collab(tmp / "probe")
        python, _cold = resolve_interpreter(data, project, tmp / "probe")
        scen = []
        for label, history, unread in (("1,000 history", 1000, 0), ("100,000 history", 100_000, 0),
                                       ("10,000 unread (another participant's)", 0, 10_000)):
            root = tmp / f"h{history}-u{unread}"
            t0 = time.perf_counter()
            box, collab, _base, _t = build_unread(root, history or unread)
            session = SESSION
            if history:  # acknowledge it all: history, nothing pending
                with box.store.transaction(collab) as tx:  # the bulk-written records have no ids/ entries yet
                    idindex.rebuild_ids(tx)
                ids = [m.id for m in box.store.since(collab, "reviewer", 0)]
                for i in range(0, len(ids), 20_000):
                    box.ack(collab, REVIEWER, ids[i:i + 20_000])
            else:  # reviewer's 10,000 stay unread; the hook runs for a watcher with nothing pending
                box.join(collab, validate.pin(f"claude-code:{WATCHER}"), "watcher")
                session = WATCHER
            env = dict(claude_env(root, data, project), CLAUDE_CODE_SESSION_ID=session)
            stdin = stdin_json(project).replace(SESSION.encode(), session.encode())
            full = dict(env, AGENTMSG_NO_FASTPATH="1")
            first, proc = timed(["/bin/sh", "-c", hook_command()], input=stdin, env=env)  # sets the marker
            if proc.returncode or proc.stdout or proc.stderr:
                raise SystemExit(f"{label}: the first run was not silent: {proc.stdout[:200]!r} {proc.stderr[-300:]!r}")
            if not (root / "idle" / "claude-code" / f"{session}.idle").is_file():
                raise SystemExit(f"{label}: no idle marker after a run with nothing pending")
            scen.append({"label": label, "env": env, "full": full, "stdin": stdin, "first_ms": first * 1e3,
                         "build_s": time.perf_counter() - t0, "fast": [], "slow": []})
            print(f"built {label} in {time.perf_counter() - t0:.1f}s", flush=True)
        floor: list[float] = []
        for i in range(args.repeats + args.warmup):
            f, _ = timed([python, "-S", "-c", "pass"])
            for sc in scen:
                a, pa = timed(["/bin/sh", "-c", hook_command()], input=sc["stdin"], env=sc["env"])
                b, pb = timed(["/bin/sh", "-c", hook_command()], input=sc["stdin"], env=sc["full"])
                if pa.stdout or pb.stdout or pa.stderr or pb.stderr:
                    raise SystemExit(f"{sc['label']}: a run with nothing pending printed something")
                if i >= args.warmup:
                    sc["fast"].append(a)
                    sc["slow"].append(b)
            if i >= args.warmup:
                floor.append(f)
        fm = stats(floor)[0]
        rows = []
        for sc in scen:
            (am, ap), (bm, _bp) = stats(sc["fast"]), stats(sc["slow"])
            rows.append({"label": sc["label"], "fast_ms": am * 1e3, "fast_p90_ms": ap * 1e3, "full_ms": bm * 1e3,
                         "floor_ms": fm * 1e3, "ratio": am / fm, "full_ratio": bm / fm, "first_ms": sc["first_ms"]})
            print(f"{sc['label']:>40}: fast {am * 1e3:5.2f} ms (p90 {ap * 1e3:5.2f}) = {am / fm:.2f}x floor; "
                  f"full {bm * 1e3:5.2f} ms = {bm / fm:.2f}x; floor {fm * 1e3:.2f} ms", flush=True)
        return {"rows": rows, "repeats": args.repeats, "python": python,
                "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fastpath_markdown(res: dict, info: dict[str, str], command: str) -> str:
    lines = ["## Hook fast path", "", f"Reproduce: `{command}`", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    lines += ["", "UserPromptSubmit with nothing pending, as Claude Code runs it (`sh -c` with the command from",
              f"`hooks/hooks.json`, `{hook_command()}`, Claude's hook environment and stdin), after one full",
              "run has left the idle marker (docs/DELIVERY.md, \"Fast path\"): the launcher reads two small files",
              "and exits; no interpreter starts. \"Full\" is the same run with `AGENTMSG_NO_FASTPATH=1` (what",
              "every prompt cost before). History: messages in the session's own inbox, all acknowledged. The",
              "10,000-unread case is a collaboration whose reviewer has 10,000 unread while the hook runs for",
              "another Claude Code participant with nothing pending. Floor: the real interpreter started bare",
              f"(`-S -c pass`), interleaved. Median of {res['repeats']} runs; load after: {res['load_after']}.", "",
              "| case | fast median | fast p90 | fast vs floor | full median | full vs floor | first run |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        lines.append(f"| {r['label']} | {r['fast_ms']:.2f} ms | {r['fast_p90_ms']:.2f} ms | **{r['ratio']:.2f}x** | "
                     f"{r['full_ms']:.2f} ms | {r['full_ratio']:.2f}x | {r['first_ms']:.1f} ms |")
    worst = max(r["ratio"] for r in res["rows"])
    lines += ["", f"Target: at most 0.5x the floor. Worst: {worst:.2f}x ({'met' if worst <= 0.5 else 'MISSED'})."]
    return "\n".join(lines) + "\n"


# ---- every host's hook command (--hosts) -----------------------------------------------------------

#: host -> (hooks file, event in that file, runtime, event name on stdin)
HOSTS = {"claude": ("hooks.json", "UserPromptSubmit", "claude-code", "UserPromptSubmit"),
         "codex": ("codex-hooks.json", "UserPromptSubmit", "codex", "UserPromptSubmit"),
         "gemini": ("hooks.json", "BeforeAgent", "gemini", "BeforeAgent"),
         "copilot": ("copilot-hooks.json", "UserPromptSubmit", "copilot", "UserPromptSubmit")}


def host_command(host: str, *, raw: bool = False) -> str:
    """The prompt hook's command as the host runs it (Gemini substitutes ``${extensionPath}`` itself)."""
    name, event, _runtime, _stdin = HOSTS[host]
    (group,) = json.loads((REPO / "hooks" / name).read_text())["hooks"][event]
    command = group["hooks"][0]["command"]
    return command if raw else command.replace("${extensionPath}", str(REPO))


def host_env(host: str, root: Path, data: Path, project: Path, session: str) -> dict[str, str]:
    """The variables each host gives its hooks (docs/HOSTS-NOTES.md, /work/shared/HOSTS-MORE.md)."""
    env = {"HOME": os.environ.get("HOME", str(project)), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "LANG": os.environ.get("LANG", "C.UTF-8"), "AGENTMSG_HOME": str(root), "AGENTMSG_NO_AHEAD": "1"}
    root_vars = {"CLAUDE_PLUGIN_ROOT": str(REPO), "CLAUDE_PLUGIN_DATA": str(data)}
    if host == "claude":
        env.update(root_vars, CLAUDE_PROJECT_DIR=str(project), CLAUDE_CODE_SESSION_ID=session, CLAUDECODE="1")
    elif host == "codex":
        env.update(root_vars, PLUGIN_ROOT=str(REPO), PLUGIN_DATA=str(data), CODEX_HOME=str(project / "codex"))
    elif host == "gemini":
        env.update(GEMINI_SESSION_ID=session, GEMINI_PROJECT_DIR=str(project), CLAUDE_PROJECT_DIR=str(project))
    else:
        env.update(root_vars, COPILOT_CLI="1", COPILOT_PLUGIN_ROOT=str(REPO), PLUGIN_ROOT=str(REPO),
                   PLUGIN_DATA=str(data), CLAUDE_PROJECT_DIR=str(project))
    return env


def hosts_run(args: argparse.Namespace) -> dict:
    """Each host's prompt hook, run the way that host runs it, in two states: 10 messages to show (presented
    for the first time each run: the state is put back), and nothing pending (every launcher answers that
    from the idle marker: Claude Code and Gemini name the session in a variable, for Codex and Copilot
    ``hooks/run`` reads it from stdin).  Interleaved with the interpreter floor."""
    from agentmsg.domain.values import Pin

    tmp = Path(tempfile.mkdtemp(prefix="hook-hosts-"))
    try:
        project = tmp / "project"
        project.mkdir()
        data = tmp / "plugin-data"
        new_collab(tmp / "probe")
        python, _cold = resolve_interpreter(data, project, tmp / "probe")
        scen = []
        for host, (_name, _event, runtime, stdin_event) in HOSTS.items():
            for state in ("10 to show", "nothing pending"):
                root = tmp / f"{host}-{state.split()[0]}"
                box, collab = new_collab(root)
                pin = Pin(runtime, SESSION if host != "claude" else "9e1c0de0-1111-4222-8333-00000000be4c")
                box.join(collab, pin, "worker")
                if state == "10 to show":
                    for i in range(10):
                        box.send(collab, DRIVER, Draft(to="worker", kind="update", priority="normal",
                                                       subject=f"bench {i}", body=f"benchmark message {i}\nline 2"))
                env = host_env(host, root, data, project, pin.session)
                stdin = json.dumps({"session_id": pin.session, "transcript_path": None, "cwd": str(project),
                                    "hook_event_name": stdin_event, "prompt": "carry on"}).encode()
                sc = {"host": host, "state": state, "env": env, "stdin": stdin, "runs": []}
                base = root / "collabs" / collab
                sc["snap"] = Snapshot(base, tmp / f"pristine-{host}-{state.split()[0]}")
                first = sc["snap"].record(lambda sc=sc: host_hook(sc))[1]
                if (state == "10 to show") != bool(first):
                    raise SystemExit(f"{host}, {state}: the first run printed {first[:200]!r}")
                scen.append(sc)
        floor: list[float] = []
        for i in range(args.repeats + args.warmup):
            f, _ = timed([python, "-S", "-c", "pass"])
            for sc in scen:
                if sc["state"] == "10 to show":
                    sc["snap"].restore()
                t, _out = host_hook(sc)
                if i >= args.warmup:
                    sc["runs"].append(t)
            if i >= args.warmup:
                floor.append(f)
        fm = stats(floor)[0]
        rows = []
        for sc in scen:
            m, p90 = stats(sc["runs"])
            rows.append({"host": sc["host"], "state": sc["state"], "median_ms": m * 1e3, "p90_ms": p90 * 1e3,
                         "floor_ms": fm * 1e3, "ratio": m / fm, "command": host_command(sc["host"])})
            print(f"{sc['host']:>8} {sc['state']:>16}: {m * 1e3:6.2f} ms (p90 {p90 * 1e3:6.2f}) = {m / fm:.2f}x floor "
                  f"({fm * 1e3:.2f} ms)", flush=True)
        return {"rows": rows, "repeats": args.repeats, "python": python,
                "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def host_hook(sc: dict) -> tuple[float, bytes]:
    t, proc = timed(["/bin/sh", "-c", host_command(sc["host"])], input=sc["stdin"], env=sc["env"])
    if proc.returncode or proc.stderr:
        raise SystemExit(f"{sc['host']} hook failed: rc={proc.returncode} {proc.stderr[-500:]!r}")
    return t, proc.stdout


def hosts_markdown(res: dict, info: dict[str, str], command: str) -> str:
    lines = ["## Hook per host", "", f"Reproduce: `{command}`", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    lines += ["", "Each host's prompt hook, run as that host runs it: the command from its hooks file through",
              "`sh -c`, with the variables that host gives its hooks and its stdin (Gemini: `BeforeAgent` from",
              "`hooks/hooks.json` with `${extensionPath}` substituted; Copilot: `hooks/copilot-hooks.json` with",
              "`COPILOT_CLI` and Claude's plugin variables set too). \"10 to show\": 10 unread messages presented",
              "for the first time on every run by the full hook (`AGENTMSG_NO_AHEAD=1`: what a prompt costs before",
              "anything is rendered ahead; rendered ahead, every launcher prints it without Python, as \"Issue 15\"",
              "shows for Claude; the collaboration's files are put back between runs). \"Nothing",
              "pending\": a bound session with an empty inbox; every launcher answers it from the idle marker",
              "without starting an interpreter (Codex and Copilot give hooks no session variable: `hooks/run`",
              "reads the session id from stdin). Floor: the real interpreter started bare (`-S -c pass`), interleaved.",
              f"Median of {res['repeats']} runs; load after: {res['load_after']}.", "",
              "| host | state | median | p90 | vs floor |", "|---|---|---:|---:|---:|"]
    for r in res["rows"]:
        lines.append(f"| {r['host']} | {r['state']} | {r['median_ms']:.2f} ms | {r['p90_ms']:.2f} ms | "
                     f"**{r['ratio']:.2f}x** |")
    lines += ["", "Commands: " + "; ".join(f"{h}: `{host_command(h, raw=True)}`" for h in HOSTS) + "."]
    return "\n".join(lines) + "\n"


# ---- OpenCode: the same hook, run by the plugin ------------------------------------------------------

OPENCODE_SESSION = "ses_0bench0opencode0session"
#: Imports the plugin and answers one ``chat.message`` per stdin line with "<ms> <chars added>" (timed inside
#: node: the spawn of hooks/run, the hook, and the parse, as OpenCode's own process pays them).
NODE_DRIVER = r"""
import { createInterface } from "node:readline";
const [plugin, sid, dir] = process.argv.slice(1);
const { AgentmsgPlugin } = await import(plugin);
const hooks = await AgentmsgPlugin({ client: null, directory: dir });
for await (const _ of createInterface({ input: process.stdin })) {
  const output = { message: { id: "msg_bench" }, parts: [{ id: "prt_bench", type: "text", text: "carry on" }] };
  const t0 = performance.now();
  await hooks["chat.message"]({ sessionID: sid }, output);
  const ms = performance.now() - t0;
  console.log(`${ms} ${output.parts.slice(1).reduce((n, p) => n + p.text.length, 0)}`);
}
"""


def opencode_env(root: Path) -> dict[str, str]:
    return {"HOME": os.environ.get("HOME", str(root)), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": os.environ.get("LANG", "C.UTF-8"), "AGENTMSG_HOME": str(root), "OPENCODE": "1",
            "AGENTMSG_CLI": str(REPO / "bin" / "agentmsg")}


def opencode_stdin(project: Path) -> bytes:
    return json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": OPENCODE_SESSION,
                       "prompt": "carry on with the review", "cwd": str(project)}).encode()


class NodePlugin:
    """One node process holding the plugin (its SessionStart already done), timing one prompt per call."""

    def __init__(self, root: Path, project: Path) -> None:
        node = shutil.which("node")
        if node is None:
            raise SystemExit("node is not on PATH")
        self.proc = subprocess.Popen(
            [node, "--input-type=module", "-e", NODE_DRIVER, "--", str(REPO / "opencode" / "agentmsg.js"),
             OPENCODE_SESSION, str(project)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=opencode_env(root))

    def call(self) -> tuple[float, int]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        ms, chars = self.proc.stdout.readline().split()
        return float(ms) / 1e3, int(chars)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def opencode_run(args: argparse.Namespace) -> dict:
    """Claude Code's hook command vs OpenCode's (``hooks/run opencode``, as the plugin spawns it) vs the whole
    plugin path in node, on the same inbox (the binding handed over to an OpenCode pin in a copy)."""
    from agentmsg.backends.file.store import FileStore
    from agentmsg.domain import validate
    from agentmsg.hosts import opencode_files as oc
    from agentmsg.service.messaging import Mailbox

    tmp = Path(tempfile.mkdtemp(prefix="hook-opencode-"))
    try:
        project = tmp / "project"
        project.mkdir()
        data = tmp / "plugin-data"
        new_collab(tmp / "probe")
        python, _cold = resolve_interpreter(data, project, tmp / "probe")
        command = oc.hook_command(REPO)
        scen = []
        for unread in args.unread:
            root = tmp / f"u{unread}"
            _box, collab, base, _t = build_unread(root, unread)
            oroot = tmp / f"oc-u{unread}"
            shutil.copytree(root, oroot, symlinks=True)
            obox = Mailbox(FileStore(oroot))
            opin = validate.pin(f"opencode:{OPENCODE_SESSION}")
            obox.handover(collab, REVIEWER, opin, alias="reviewer")
            obox.join(collab, opin, "reviewer", succeeds=REVIEWER, reason="bench: the same inbox in OpenCode")
            obase = Path(obox.store.base(collab))  # type: ignore[attr-defined]
            sc: dict = {"unread": unread, "claude": [], "opencode": [], "plugin": []}
            cenv, oenv = claude_env(root, data, project), opencode_env(oroot)

            def claude(cenv: dict = cenv) -> tuple[float, int]:
                t, proc = timed(["/bin/sh", "-c", hook_command()], input=stdin_json(project), env=cenv)
                return t, len(json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"])

            def opencode(oenv: dict = oenv) -> tuple[float, int]:
                t, proc = timed(["/bin/sh", "-c", command], input=opencode_stdin(project), env=oenv)
                return t, len(json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"])

            plugin = NodePlugin(oroot, project)
            sc["snap_c"] = Snapshot(base, tmp / f"pristine-c-{unread}")
            sc["snap_o"] = Snapshot(obase, tmp / f"pristine-o-{unread}")
            sc["shown"] = sc["snap_c"].record(claude)[1]
            sc["snap_o"].record(lambda plugin=plugin: (opencode(), plugin.call()))  # its first call: SessionStart too
            sc.update(claude=claude, opencode=opencode, plugin=plugin, runs={"claude": [], "opencode": [],
                                                                             "plugin": []})
            scen.append(sc)
            print(f"built {unread:,} unread", flush=True)
        floor: list[float] = []
        for i in range(args.repeats + args.warmup):
            f, _ = timed([python, "-S", "-c", "pass"])
            for sc in scen:
                for name, snap in (("claude", "snap_c"), ("opencode", "snap_o"), ("plugin", "snap_o")):
                    sc[snap].restore()
                    t, chars = sc[name]() if name != "plugin" else sc["plugin"].call()
                    sc[snap].restore()
                    if not chars:
                        raise SystemExit(f"{name} showed nothing at unread {sc['unread']}")
                    if i >= args.warmup:
                        sc["runs"][name].append(t)
            if i >= args.warmup:
                floor.append(f)
        fm = stats(floor)[0]
        rows = []
        for sc in scen:
            sc["plugin"].close()
            med = {k: stats(v)[0] for k, v in sc["runs"].items()}
            c, o, p = med["claude"], med["opencode"], med["plugin"]
            rows.append({"unread": sc["unread"], "floor_ms": fm * 1e3, **{f"{k}_ms": v * 1e3 for k, v in med.items()},
                         "opencode_vs_claude": o / c, "opencode_vs_floor": o / fm, "plugin_vs_claude": p / c})
            print(f"unread {sc['unread']:>7,}: claude {c * 1e3:6.2f} ms  opencode {o * 1e3:6.2f} ms ({o / c:.2f}x "
                  f"claude, {o / fm:.2f}x floor)  plugin in node {p * 1e3:6.2f} ms ({p / c:.2f}x claude)", flush=True)
        return {"rows": rows, "repeats": args.repeats, "command": command,
                "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def opencode_markdown(res: dict, info: dict[str, str], command: str) -> str:
    lines = ["## Hook in OpenCode", "", f"Reproduce: `{command}`", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    lines += ["", "UserPromptSubmit on the same inbox three ways, interleaved in each round with the floor (the",
              "real interpreter started bare, `-S -c pass`): Claude Code's hook command (`hooks/hooks.json`);",
              f"OpenCode's, as the plugin spawns it (`{res['command'].replace(str(REPO), '<repo>')}`, OpenCode's "
              "environment and stdin;",
              "the binding handed over to an `opencode:` pin in a copy of the inbox); and the whole plugin path,",
              "the `chat.message` handler of `opencode/agentmsg.js` in node, timed inside node (spawn, hook,",
              "parse). Every run presents the same 20 messages for the first time (changed files put back).",
              f"Median of {res['repeats']} runs; load after: {res['load_after']}.", "",
              "| unread | Claude hook | OpenCode hook | OpenCode vs Claude | OpenCode vs floor | plugin in node | "
              "plugin vs Claude hook |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        lines.append(f"| {r['unread']:,} | {r['claude_ms']:.2f} ms | {r['opencode_ms']:.2f} ms | "
                     f"**{r['opencode_vs_claude']:.2f}x** | {r['opencode_vs_floor']:.2f}x | {r['plugin_ms']:.2f} ms | "
                     f"{r['plugin_vs_claude']:.2f}x |")
    worst = max(r["opencode_vs_claude"] for r in res["rows"])
    lines += ["", f"Target: the same hook speed as Claude Code's (at most 1.1x). Worst: {worst:.2f}x "
              f"({'met' if worst <= 1.1 else 'MISSED'}). The plugin column adds node's spawn of `/bin/sh`, which",
              "OpenCode pays in its own process (Bun) instead of a host's hook runner."]
    return "\n".join(lines) + "\n"


# ---- issue 15: every hook case side by side ----------------------------------------------------------

TOOL_FIELDS = {"tool_name": "Bash", "tool_input": {"command": "sleep 1"}, "tool_use_id": "toolu_bench",
               "tool_response": {"stdout": "", "stderr": "", "interrupted": False}}
PENDING = 20


def event_command(event: str) -> str:
    (group,) = json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"][event]
    return group["hooks"][0]["command"]


def child_run(argv: list[str], stdin: bytes | None, env: dict[str, str] | None = None) -> tuple[float, float, bytes]:
    """(wall, CPU, stdout) of one whole process; CPU is its user + system time, which load inflates less."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode or proc.stderr:
        raise SystemExit(f"{argv}: rc={proc.returncode} {proc.stderr[-400:]!r}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc.stdout


class Rendered:
    """The busy session's delivery rendered ahead, put back before every run with its collaboration.

    A timed run is the prompt hook alone (what the host waits for).  After it, untimed, the renderer
    folds the launcher's claim (presented receipts, hook state) and renders the next prompt; only
    then are the collaboration's files and the session's ``idle/`` files restored, so every run
    prints the same 20 messages for the first time and the renderer is never raced.
    """

    SUFFIXES = (".gen", ".idle", ".mid", ".env", ".ready", ".fold", ".took")

    def __init__(self, root: Path, base: Path, pin: str, scratch: Path) -> None:
        from agentmsg.backends.file import ahead

        self.root, self.pin, self.ahead = str(os.path.realpath(root)), pin, ahead
        self.at = Path(ahead.base(self.root, pin) or "")
        self.snap = Snapshot(base, scratch)
        self.idle = {sfx: self._read(sfx) for sfx in self.SUFFIXES}

    def _read(self, sfx: str) -> bytes | None:
        path = Path(f"{self.at}{sfx}")
        return path.read_bytes() if path.exists() else None

    def renderer(self) -> int | None:
        try:
            pid = int((Path(self.root) / "idle" / self.ahead.PID).read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid

    def cpu(self) -> float:
        """The renderer's time on a CPU so far, in seconds (``/proc/PID/schedstat``: nanoseconds, where
        ``stat``'s clock ticks are 10 ms); 0 when none runs."""
        pid = self.renderer()
        if pid is None:
            return 0.0
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9

    def wait(self, timeout: float = 20.0) -> None:
        """Until the claim is folded and the next prompt rendered (what the renderer does after a run)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not Path(f"{self.at}.took").exists() and self.ahead.current(self.root, self.pin):
                return
            time.sleep(0.002)
        raise SystemExit(f"the renderer did not settle {self.pin} ({sorted(os.listdir(self.at.parent))})")

    def record(self, run: Any) -> Any:
        def step() -> Any:
            out = run()
            self.wait()
            return out

        return self.snap.record(step)

    def restore(self) -> None:
        self.snap.restore()
        for sfx, data in self.idle.items():
            path = Path(f"{self.at}{sfx}")
            if data is None:
                path.unlink(missing_ok=True)
            elif not path.exists() or path.read_bytes() != data:
                tmp = path.with_name(path.name + ".bench")
                tmp.write_bytes(data)
                tmp.replace(path)


def _no_renderer(folder: str, names: list[str]) -> list[str]:
    """copytree's ignore: the renderer's lock, pid and doorbell belong to the root they were made in."""
    return [n for n in names if n.startswith("ahead.")] if os.path.basename(folder) == "idle" else []


def issue15_run(args: argparse.Namespace) -> dict:
    """Prompt hook with nothing pending, PostToolUse with nothing due, prompt hook with 20 pending: one run."""
    from agentmsg.backends.file import idindex
    from agentmsg.backends.file.store import FileStore
    from agentmsg.domain import validate
    from agentmsg.domain.values import Draft
    from agentmsg.service import delivery
    from agentmsg.service.messaging import Mailbox

    tmp = Path(tempfile.mkdtemp(prefix="hook-15-"))
    cases = ("prompt", "tool", "busy", "busy_full")
    renderers: list[Rendered] = []
    try:
        project = tmp / "project"
        project.mkdir()
        data = tmp / "plugin-data"
        new_collab(tmp / "probe")
        python, _cold = resolve_interpreter(data, project, tmp / "probe")
        sh = ["/bin/sh", "-c"]
        scen = []
        for label, history, unread in (("1,000 history", 1000, 0), ("100,000 history", 100_000, 0),
                                       ("10,000 unread (another participant's)", 0, 10_000)):
            t0 = time.perf_counter()
            root = tmp / f"h{history}-u{unread}"
            box, collab, base, _t = build_unread(root, history or unread)
            session, pin, alias = SESSION, REVIEWER, "reviewer"
            if history:  # acknowledge it all: history, nothing pending
                with box.store.transaction(collab) as tx:  # the bulk-written records have no ids/ entries yet
                    idindex.rebuild_ids(tx)
                ids = [m.id for m in box.store.since(collab, "reviewer", 0)]
                for i in range(0, len(ids), 1000):
                    box.ack(collab, REVIEWER, ids[i:i + 1000])
            else:  # reviewer's 10,000 stay unread; the hooks run for a watcher
                session, alias = WATCHER, "watcher"
                pin = validate.pin(f"claude-code:{WATCHER}")
                box.join(collab, pin, alias)
            delivery.set_midturn(box.store, collab, pin, on=True)  # opted in; nothing high-priority is due
            env = dict(claude_env(root, data, project, ahead=True), CLAUDE_CODE_SESSION_ID=session)
            prompt_in = stdin_json(project).replace(SESSION.encode(), session.encode())
            tool_in = json.dumps(json.loads(prompt_in) | {"hook_event_name": "PostToolUse"} | TOOL_FIELDS).encode()
            for command, stdin, marker in ((event_command("UserPromptSubmit"), prompt_in, "idle"),
                                           (event_command("PostToolUse"), tool_in, "mid")):
                out = child_run([*sh, command], stdin, env)[2]  # the full run that leaves the marker
                if out or not (root / "idle" / "claude-code" / f"{session}.{marker}").is_file():
                    raise SystemExit(f"{label}: no .{marker} marker after a run with nothing to show ({out[:200]!r})")
            # The same session with PENDING new messages: a copy of the state (the facts its hooks recorded
            # included), restored before every run.  The sends ring the renderer, as any sender's would.
            busy_root = tmp / f"busy-h{history}-u{unread}"
            shutil.copytree(root, busy_root, symlinks=True, ignore=_no_renderer)
            busy = Mailbox(FileStore(busy_root))
            sent_at = 0.0
            for i in range(PENDING):
                busy.send(collab, DRIVER, Draft(to=alias, kind="update", priority="normal", subject=f"pending {i}",
                                                body=f"pending message {i}\nsecond line"))
                sent_at = time.perf_counter()
            busy_base = busy_root / base.relative_to(root)
            rendered = Rendered(busy_root, busy_base, str(pin), tmp / f"pristine-busy-h{history}-u{unread}")
            rendered.wait()
            latency = time.perf_counter() - sent_at
            busy.inbox(collab, pin)  # the map folds the new messages once, untimed (no write voids the delivery)
            rendered = Rendered(busy_root, busy_base, str(pin), tmp / f"pristine-busy-h{history}-u{unread}-2")
            renderers.append(rendered)
            busy_env = dict(env, AGENTMSG_HOME=str(busy_root))
            full_env = dict(busy_env, AGENTMSG_NO_AHEAD="1")  # the same prompt with no delivery rendered ahead
            shown = rendered.record(lambda e=busy_env, i=prompt_in: child_run(
                [*sh, event_command("UserPromptSubmit")], i, e)[2])
            text = json.loads(shown)["hookSpecificOutput"]["additionalContext"]
            if f"{PENDING} quoted below" not in text:
                raise SystemExit(f"{label}: the busy prompt did not show {PENDING} messages")
            full = child_run([*sh, event_command("UserPromptSubmit")], prompt_in, full_env)[2]
            rendered.restore()
            if len(full) != len(shown):
                raise SystemExit(f"{label}: the full hook printed {len(full)} bytes, the rendered one {len(shown)}")
            scen.append({"label": label, "env": env, "busy_env": busy_env, "full_env": full_env,
                         "prompt_in": prompt_in, "tool_in": tool_in, "rendered": rendered, "shown": len(shown),
                         "latency_ms": latency * 1e3, "cpu": [],
                         "samples": {k: ([], []) for k in cases}})
            print(f"built {label} in {time.perf_counter() - t0:.1f}s (rendered {latency * 1e3:.0f} ms after the "
                  f"last send)", flush=True)
        floor_w: list[float] = []
        floor_c: list[float] = []
        for i in range(args.repeats + args.warmup):
            fw, fc, _ = child_run([python, "-S", "-c", "pass"], None)
            for sc in scen:
                rendered = sc["rendered"]
                runs = {
                    "prompt": child_run([*sh, event_command("UserPromptSubmit")], sc["prompt_in"], sc["env"]),
                    "tool": child_run([*sh, event_command("PostToolUse")], sc["tool_in"], sc["env"]),
                }
                before = rendered.cpu()
                runs["busy"] = child_run([*sh, event_command("UserPromptSubmit")], sc["prompt_in"], sc["busy_env"])
                rendered.wait()
                cpu = rendered.cpu() - before
                rendered.restore()
                runs["busy_full"] = child_run([*sh, event_command("UserPromptSubmit")], sc["prompt_in"],
                                              sc["full_env"])
                rendered.restore()
                if (runs["prompt"][2] or runs["tool"][2] or len(runs["busy"][2]) != sc["shown"]
                        or len(runs["busy_full"][2]) != sc["shown"]):
                    raise SystemExit(f"{sc['label']}: round {i} showed something else")
                if i >= args.warmup:
                    sc["cpu"].append(cpu)
                    for k, (w, c, _o) in runs.items():
                        sc["samples"][k][0].append(w)
                        sc["samples"][k][1].append(c)
            if i >= args.warmup:
                floor_w.append(fw)
                floor_c.append(fc)
        fw, fc = statistics.median(floor_w), statistics.median(floor_c)
        rows = []
        for sc in scen:
            row = {"label": sc["label"], "floor_ms": fw * 1e3, "floor_cpu_ms": fc * 1e3,
                   "latency_ms": sc["latency_ms"], "renderer_cpu_ms": statistics.median(sc["cpu"]) * 1e3}
            for k, (walls, cpus) in sc["samples"].items():
                w, c = statistics.median(walls), statistics.median(cpus)
                row[k] = {"ms": w * 1e3, "ratio": w / fw, "cpu_ms": c * 1e3, "cpu_ratio": c / fc if fc else 0.0}
            rows.append(row)
            print(f"{sc['label']:>40}: " + "  ".join(f"{k} {row[k]['ms']:6.2f} ms = {row[k]['ratio']:.2f}x "
                                                       f"(cpu {row[k]['cpu_ratio']:.2f}x)" for k in cases)
                  + f"  floor {fw * 1e3:.2f} ms  renderer {row['renderer_cpu_ms']:.1f} ms CPU per prompt",
                  flush=True)
        return {"rows": rows, "repeats": args.repeats, "python": python,
                "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    finally:
        for rendered in renderers:
            pid = rendered.renderer()
            if pid is not None:
                os.kill(pid, 15)
        shutil.rmtree(tmp, ignore_errors=True)


def issue15_markdown(res: dict, info: dict[str, str], command: str) -> str:
    lines = ["## Issue 15: every hook case side by side", "", f"Reproduce: `{command}`", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    lines += ["", "Whole processes as Claude Code runs them (`sh -c` with the command from `hooks/hooks.json`,",
              "Claude's hook environment and stdin), interleaved in one run: each round runs the floor (the real",
              "interpreter started bare, `-S -c pass`), then at every size the prompt hook with nothing pending",
              f"(`{event_command('UserPromptSubmit')}`: the idle marker, no interpreter), the PostToolUse hook",
              f"with nothing due (`{event_command('PostToolUse')}`: the `.mid` marker, no interpreter; mid-turn",
              f"delivery is on for the binding), and the prompt hook with {PENDING} new messages pending, twice:",
              "as it runs once the renderer has rendered the delivery ahead (docs/DELIVERY.md, \"Rendered ahead\":",
              "the launcher claims `.took`, prints `.ready` with one `cat`, rings the renderer; no interpreter), and",
              "as it runs when nothing was rendered yet (`AGENTMSG_NO_AHEAD=1`: the full Python hook, "
              f"{PENDING} presented",
              "receipts appended, not fsynced, boundary rendering, completion receipt). After each busy run, untimed,",
              "the renderer folds the claim into presented receipts and renders the next prompt; then every file",
              "it changed is put back. History: messages in the session's own inbox, all acknowledged. 10,000",
              "unread: another participant's inbox; the hooks run for a watcher.",
              f"Median of {res['repeats']} runs each; CPU is the child's user + system time (`getrusage`), which",
              f"the machine's load inflates less than wall time. Load after: {res['load_after']}.", "",
              f"| case | prompt, nothing pending | PostToolUse, nothing due "
              f"| prompt, {PENDING} pending (rendered ahead) | prompt, {PENDING} pending (full hook) | floor |",
              "|---|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        cells = [f"{r[k]['ms']:.2f} ms = **{r[k]['ratio']:.2f}x** (CPU {r[k]['cpu_ratio']:.2f}x)"
                 for k in ("prompt", "tool", "busy", "busy_full")]
        lines.append(f"| {r['label']} | " + " | ".join(cells) + f" | {r['floor_ms']:.2f} ms |")

    def verdict(key: str, target: float) -> str:
        worst = max(r[key]["ratio"] for r in res["rows"])
        return f"worst {worst:.2f}x ({'met' if worst <= target else 'MISSED'})"

    lines += ["", f"Targets (wall time, vs the floor): prompt with nothing pending at most 0.5x: "
                  f"{verdict('prompt', 0.5)}; PostToolUse with nothing due at most 0.5x: {verdict('tool', 0.5)}; "
                  f"prompt with {PENDING} pending at most 1.5x: {verdict('busy', 1.5)}. For comparison, the full "
                  f"hook (what a prompt costs when nothing was rendered ahead yet): worst "
                  f"{max(r['busy_full']['ratio'] for r in res['rows']):.2f}x."]
    lines += ["", "Off the prompt's path, per case: how long after the last of the 20 sends the delivery was "
                  "rendered (the first send's doorbell started the renderer), and the renderer's CPU per busy prompt "
                  "(folding the claim, rendering the next prompt; median):", "",
              "| case | rendered after the last send | renderer CPU per prompt |", "|---|---:|---:|"]
    lines += [f"| {r['label']} | {r['latency_ms']:.0f} ms | {r['renderer_cpu_ms']:.1f} ms |" for r in res["rows"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--unread", default="10,10000,100000", help="unread counts in the inbox")
    ap.add_argument("--repeats", type=int, default=40, help="timed runs per scenario")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs first")
    ap.add_argument("--shim-repeats", type=int, default=10, help="runs through the shim")
    ap.add_argument("--write-md", action="store_true", help="update the ## Hook and ack section of docs/BENCHMARKS.md")
    ap.add_argument("--fastpath", action="store_true", help="time the launcher's fast path instead "
                    "(## Hook fast path)")
    ap.add_argument("--hosts", action="store_true", help="time each host's hook command (## Hook per host)")
    ap.add_argument("--opencode", action="store_true", help="time OpenCode's hook command and plugin against "
                    "Claude Code's (## Hook in OpenCode)")
    ap.add_argument("--issue15", action="store_true", help="every hook case of issue 15 side by side instead "
                    "(## Issue 15: every hook case side by side)")
    args = ap.parse_args()
    args.unread = [int(x) for x in args.unread.split(",")]
    info = machine()
    if args.issue15:
        res = issue15_run(args)
        if args.write_md:
            command = "python3 bench/hook_bench.py --issue15 --write-md"
            if args.repeats != 40:
                command = f"python3 bench/hook_bench.py --issue15 --repeats {args.repeats} --write-md"
            write_section(REPO / "docs" / "BENCHMARKS.md", "Issue 15: every hook case side by side",
                          issue15_markdown(res, info, command))
        return
    if args.opencode:
        res = opencode_run(args)
        if args.write_md:
            command = (f"python3 bench/hook_bench.py --opencode --repeats {args.repeats} "
                       f"--unread {','.join(map(str, args.unread))} --write-md")
            write_section(REPO / "docs" / "BENCHMARKS.md", "Hook in OpenCode", opencode_markdown(res, info, command))
        return
    if args.hosts:
        res = hosts_run(args)
        if args.write_md:
            command = "python3 bench/hook_bench.py --hosts --write-md"
            if args.repeats != 40:
                command = f"python3 bench/hook_bench.py --hosts --repeats {args.repeats} --write-md"
            write_section(REPO / "docs" / "BENCHMARKS.md", "Hook per host", hosts_markdown(res, info, command))
        return
    if args.fastpath:
        res = fastpath_run(args)
        if args.write_md:
            command = "python3 bench/hook_bench.py --fastpath --write-md"
            if args.repeats != 40:
                command = f"python3 bench/hook_bench.py --fastpath --repeats {args.repeats} --write-md"
            write_section(REPO / "docs" / "BENCHMARKS.md", "Hook fast path", fastpath_markdown(res, info, command))
        return
    res = run(args)
    if "shim" in res:
        s = res["shim"]
        print(f"shim python3 -S -c pass: {s['median_ms']:.1f} ms; naive hook via shim: "
              f"{s['naive_hook_median_ms']:.1f} ms; launcher cold first run: {res['cold_first_run_ms']:.1f} ms")
    print(f"imports: hooks {res['imports_us']['agentmsg.hooks.entry'] / 1e3:.2f} ms, "
          f"store {res['imports_us']['agentmsg.backends.file.store'] / 1e3:.2f} ms")
    if args.write_md:
        command = "python3 bench/hook_bench.py --write-md"
        if args.repeats != 40 or args.unread != [10, 10000, 100000]:
            command = (f"python3 bench/hook_bench.py --repeats {args.repeats} "
                       f"--unread {','.join(map(str, args.unread))} --write-md")
        write_section(REPO / "docs" / "BENCHMARKS.md", "Hook and ack", markdown(res, info, command))


if __name__ == "__main__":
    main()
