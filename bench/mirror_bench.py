#!/usr/bin/env python3
"""Mirror benchmark: commit-to-local-file latency of ``agentmsg sync``, and the prompt hook on a replica root.

    .venv/bin/python bench/mirror_bench.py [--store URL] [--sends 200] [--repeats 40] [--write-md]

Latency: a mirror (``agentmsg sync``, a process of its own) follows the
store; this process sends messages one at a time through the store's port
(the service's ``Mailbox.send``, as the CLI does) and times from the send's
return (the commit) until the record is in the replica's local inbox file,
watched by polling its size every 0.2 ms.  Without ``--store``, the remote
is a file store at another state root (the mirror polls it: ``wait_any``);
with ``--store postgresql://...`` it is PostgreSQL (LISTEN/NOTIFY).

Hook: UserPromptSubmit as Claude Code runs it (``sh -c`` with the command
from ``hooks/hooks.json``), presenting the same 20 messages each run, on an
ordinary root and on a replica root with ``AGENTMSG_STORE`` set and a mirror
running (its lock held by this process), each as a ratio to the floor (the
real interpreter started bare), interleaved in the same run.  On the replica
the receipts go to the outbox; the outbox and every changed file are put
back before each run.  ``--write-md`` replaces the ``## Mirror`` section of
docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BENCH))

from hook_bench import claude_env, hook_command, resolve_interpreter, stats, stdin_json, timed  # noqa: E402
from store_bench import REVIEWER, Snapshot, build_unread, machine, new_collab, write_section  # noqa: E402

from agentmsg import fsio  # noqa: E402
from agentmsg.backends import url as storeurl  # noqa: E402
from agentmsg.backends.file import layout  # noqa: E402
from agentmsg.domain.values import Draft, Pin  # noqa: E402
from agentmsg.service.messaging import Mailbox  # noqa: E402

LEAD = Pin("codex", "0199-mirror-bench-lead")


def latency(url: str | None, sends: int, tmp: Path) -> dict:
    """Median and p90 from a send's commit to the record in the replica's inbox file."""
    url = url or f"file://{tmp / 'remote'}"
    remote = storeurl.open_store(url)
    box = Mailbox(remote)
    reg = box.open(LEAD, "lead", "bench", "mirror latency", None)
    collab = reg.collab
    box.join(collab, REVIEWER, "reviewer")
    local = tmp / "replica"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMSG_")}
    env.update(PYTHONPATH=str(REPO), AGENTMSG_HOME=str(local), AGENTMSG_STORE=url)
    mirror = subprocess.Popen([sys.executable, "-m", "agentmsg", "sync", "--idle-exit", "10m"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    inbox = local / "collabs" / collab / "inbox" / "reviewer.jsonl"
    try:
        deadline = time.monotonic() + 60
        while not (local / "collabs" / collab / "collab.jsonl").exists():
            if time.monotonic() > deadline or mirror.poll() is not None:
                raise SystemExit(f"the mirror did not start: {mirror.stderr.read() if mirror.stderr else b''!r}")
            time.sleep(0.01)
        samples = []
        for i in range(sends + 5):
            size = fsio.file_size(inbox)
            box.send(collab, LEAD, Draft(to="reviewer", subject=f"m{i}", body=f"body {i}", kind="update"))
            t0 = time.perf_counter()
            while fsio.file_size(inbox) == size:
                if time.perf_counter() - t0 > 30:
                    raise SystemExit(f"message {i} did not reach the replica within 30 s")
                time.sleep(0.0002)
            if i >= 5:
                samples.append(time.perf_counter() - t0)
            time.sleep(0.02)  # the mirror is waiting again, as between real sends
        med, p90 = stats(samples)
        return {"store": url.split("://")[0], "sends": sends, "median_ms": med * 1e3, "p90_ms": p90 * 1e3}
    finally:
        mirror.terminate()
        mirror.wait()


def hook_ratio(repeats: int, warmup: int, store: str, tmp: Path) -> dict:
    """The prompt hook on an ordinary root and on a replica root (store configured), each vs the floor."""
    project = tmp / "project"
    project.mkdir(parents=True)
    data = tmp / "plugin-data"
    new_collab(tmp / "probe")
    python, _cold = resolve_interpreter(data, project, tmp / "probe")
    plain = tmp / "plain"
    _box, _collab, base, _t = build_unread(plain, 10)
    replica = tmp / "replica-root"
    shutil.copytree(plain, replica, symlinks=True)
    (replica / layout.REPLICA).write_text(f'{{"store": "{store}"}}\n')
    # A running mirror (the root's helper, with the mirror duty): the hook only probes the lock.
    (replica / layout.IDLE).mkdir(mode=0o700, exist_ok=True)
    lock = fsio.locked(replica / layout.IDLE / layout.HELPER_LOCK, 0)
    lock.__enter__()
    (replica / layout.IDLE / layout.HELPER_PID).write_text(f"{os.getpid()}\nmirror retry\n")
    scen = {
        "ordinary root": {"env": claude_env(plain, data, project), "base": base},
        "replica root, AGENTMSG_STORE set": {"env": dict(claude_env(replica, data, project), AGENTMSG_STORE=store),
                                             "base": replica / base.relative_to(plain)},
    }
    outbox = replica / layout.OUTBOX

    def hook(sc: dict) -> float:
        h, proc = timed(["/bin/sh", "-c", hook_command()], input=stdin_json(project), env=sc["env"])
        if proc.returncode or proc.stderr or not proc.stdout:
            raise SystemExit(f"hook failed: rc={proc.returncode} {proc.stderr[-500:]!r} {proc.stdout[:200]!r}")
        return h

    try:
        for name, sc in scen.items():
            sc["snap"] = Snapshot(sc["base"], tmp / f"pristine-{len(name)}")
            sc["snap"].record(lambda sc=sc: hook(sc))
            sc["runs"] = []
            outbox.unlink(missing_ok=True)
        floor = []
        for i in range(repeats + warmup):
            f, _ = timed([python, "-S", "-c", "pass"])
            for sc in scen.values():
                sc["snap"].restore()
                outbox.unlink(missing_ok=True)
                h = hook(sc)
                if i >= warmup:
                    sc["runs"].append(h)
            if i >= warmup:
                floor.append(f)
        if not outbox.exists():
            raise SystemExit("the replica's hook wrote no outbox entry")
        fm = stats(floor)[0]
        rows = []
        for name, sc in scen.items():
            hm, hp = stats(sc["runs"])
            rows.append({"case": name, "median_ms": hm * 1e3, "p90_ms": hp * 1e3, "ratio": hm / fm})
            print(f"{name:>36}: hook {hm * 1e3:6.2f} ms (p90 {hp * 1e3:6.2f})  floor {fm * 1e3:5.2f} ms  "
                  f"{hm / fm:.2f}x", flush=True)
        return {"rows": rows, "floor_ms": fm * 1e3, "repeats": repeats,
                "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    finally:
        lock.__exit__(None, None, None)


def markdown(lat: list[dict], hook: dict, info: dict[str, str], command: str) -> str:
    lines = ["## Mirror", "", f"Reproduce: `{command}`", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    lines += ["", "Commit to local file: a mirror (`agentmsg sync`, its own process) follows the store; messages are",
              "sent one at a time through the store's port and timed from the send's return (the commit) until",
              "the record is in the replica root's inbox file (its size polled every 0.2 ms). A file remote is",
              "polled by the mirror (`wait_any`, 50 ms); PostgreSQL wakes it by LISTEN/NOTIFY.", "",
              "| store | sends | median | p90 |", "|---|---:|---:|---:|"]
    for r in lat:
        lines.append(f"| {r['store']} | {r['sends']} | {r['median_ms']:.1f} ms | {r['p90_ms']:.1f} ms |")
    rows = hook["rows"]
    lines += ["", "Prompt hook with a store configured: UserPromptSubmit as Claude Code runs it, presenting the same",
              "20 messages each run, on an ordinary root and on a replica root (`AGENTMSG_STORE` set, a mirror",
              "running: the hook probes its lock, reads local files, and writes its receipts to the outbox).",
              "Changed files and the outbox are put back before each run. Floor: the real interpreter started",
              f"bare, interleaved. Median of {hook['repeats']} runs; load after: {hook['load_after']}.", "",
              "| case | median | p90 | vs floor |", "|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['median_ms']:.2f} ms | {r['p90_ms']:.2f} ms | **{r['ratio']:.2f}x** |")
    change = rows[1]["ratio"] / rows[0]["ratio"]
    lines += ["", f"Replica vs ordinary root: {change:.2f}x (target: the same ratio to the floor as today)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", action="append", default=[], help="a remote store URL (repeatable); "
                    "default: a file store at another root")
    ap.add_argument("--pg", action="store_true",
                    help="also a throwaway PostgreSQL server (tests/support/pg.py, fsync on)")
    ap.add_argument("--sends", type=int, default=200, help="timed sends per store")
    ap.add_argument("--repeats", type=int, default=40, help="timed hook runs per case")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--write-md", action="store_true", help="update the ## Mirror section of docs/BENCHMARKS.md")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    cluster = None
    if args.pg:
        from tests.support.pg import Cluster

        cluster = Cluster(fsync=True).init().start()
        cluster.make_template()
        args.store.append(cluster.url(cluster.new_db()))
    try:
        lat = []
        for i, url in enumerate([None, *args.store]):
            lat.append(latency(url, args.sends, tmp / f"lat{i}"))
            r = lat[-1]
            print(f"{r['store']:>10}: commit -> local file median {r['median_ms']:.1f} ms, p90 {r['p90_ms']:.1f} ms",
                  flush=True)
        hook = hook_ratio(args.repeats, args.warmup, "postgresql://bench@db.example/agentmsg", tmp / "hook")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if cluster is not None:
            cluster.destroy()
    if args.write_md:
        command = "python3 bench/mirror_bench.py" + (" --pg" if args.pg else "") + " --write-md"
        write_section(REPO / "docs" / "BENCHMARKS.md", "Mirror", markdown(lat, hook, machine(), command))


if __name__ == "__main__":
    main()
