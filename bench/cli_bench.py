#!/usr/bin/env python3
"""CLI start-up benchmark: ``agentmsg send`` and ``agentmsg status`` as ratios to ``python -c 'import typer'``.

    .venv/bin/python bench/cli_bench.py [--repeats 40] [--write-md]

Whole processes, interleaved in one run: the floor ``python -c 'import typer'``
(what any typer CLI pays before its first line of its own), then
``python -m agentmsg.cli send ...`` (a durable send to one recipient, through
the secret scanner) and ``python -m agentmsg.cli status ...`` (a read of one
collaboration) against a state root with one collaboration of two.  Modules
are compiled first (``PYTHONDONTWRITEBYTECODE`` is dropped), as in an
installed copy.  Target: each at most 1.5x the floor.

It also times, in-process, what the lazy construction saves: building the
whole command tree vs only the named command (``agentmsg.cli.app``).
``--write-md`` replaces the ``## CLI start-up`` section of docs/BENCHMARKS.md.
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

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BENCH))

from store_bench import DRIVER, machine, new_collab, write_section  # noqa: E402

BUILD = """
import sys, time
sys.path.insert(0, {repo!r})
t0 = time.perf_counter()
import agentmsg.cli.app as app
t1 = time.perf_counter()
app.{what}
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def env_for(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMSG_", "CLAUDE", "CODEX"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(PYTHONPATH=str(REPO), AGENTMSG_HOME=str(root), TERM="dumb")
    return env


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system of the child) for one whole process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    _pid, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv[:5])} ... exited {proc.returncode}: {err[-400:]!r}")
    if argv[-1] == "--json" and not json.loads(out)["ok"]:
        raise SystemExit(f"{argv} failed: {out[:400]!r}")
    return took, usage.ru_utime + usage.ru_stime


def build_cost(env: dict[str, str], what: str, repeats: int) -> float:
    """Median seconds to build ``what`` in a fresh process (the app module already imported)."""
    out = []
    for _ in range(repeats):
        done = subprocess.run([sys.executable, "-c", BUILD.format(repo=str(REPO), what=what)], env=env,
                              capture_output=True, text=True, check=True)
        out.append(float(done.stdout.split()[1]))
    return statistics.median(out)


def run(args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="cli-bench-"))
    try:
        root = tmp / "state"
        _box, collab = new_collab(root)
        env = env_for(root)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "agentmsg")], env=env,
                       capture_output=True, check=False)
        cli = [sys.executable, "-m", "agentmsg.cli"]
        argvs = {
            "floor": [sys.executable, "-c", "import typer"],
            "send": [*cli, "send", "--collab", collab, "--self", str(DRIVER), "--to", "reviewer", "--subject",
                     "bench", "--body", "a benchmark message", "--json"],
            "status": [*cli, "status", "--collab", collab, "--self", str(DRIVER), "--json"],
        }
        samples: dict[str, list[float]] = {k: [] for k in argvs}
        cpu: dict[str, list[float]] = {k: [] for k in argvs}
        for i in range(args.repeats + args.warmup):
            for name, argv in argvs.items():
                took, used = timed(argv, env)
                if i >= args.warmup:
                    samples[name].append(took)
                    cpu[name].append(used)
        med = {k: statistics.median(v) for k, v in samples.items()}
        cmed = {k: statistics.median(v) for k, v in cpu.items()}
        res = {"repeats": args.repeats, "median_ms": {k: v * 1e3 for k, v in med.items()},
               "cpu_ms": {k: v * 1e3 for k, v in cmed.items()},
               "ratio": {k: med[k] / med["floor"] for k in ("send", "status")},
               "cpu_ratio": {k: cmed[k] / cmed["floor"] for k in ("send", "status")},
               "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
               "tree_ms": build_cost(env, "app_command()", 7) * 1e3,
               "one_ms": build_cost(env, "one_command(['send'])", 7) * 1e3}
        for k in ("send", "status"):
            print(f"{k}: {med[k] * 1e3:.1f} ms vs import typer {med['floor'] * 1e3:.1f} ms: {res['ratio'][k]:.2f}x"
                  f" (CPU {cmed[k] * 1e3:.1f} vs {cmed['floor'] * 1e3:.1f} ms: {res['cpu_ratio'][k]:.2f}x)")
        print(f"building the whole tree {res['tree_ms']:.1f} ms, only `send` {res['one_ms']:.1f} ms")
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def markdown(res: dict, info: dict[str, str], command: str) -> str:
    m, r = res["median_ms"], res["ratio"]

    def verdict(x: float) -> str:
        return "met" if x <= 1.5 else "MISSED"

    lines = ["## CLI start-up", "", f"Reproduce: `{command}`", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    c, cr = res["cpu_ms"], res["cpu_ratio"]
    lines += ["", "Whole processes, interleaved in one run (each round: floor, send, status), median of "
                  f"{res['repeats']} each; modules compiled first, as installed. Target: at most 1.5x the floor "
                  "in wall time. CPU is the child's user + system time (`os.wait4`), which the machine's load "
                  f"inflates less. Load average after the runs: {res['load']}.", "",
              "| what | wall median | vs floor | CPU median | vs floor |", "|---|---:|---:|---:|---:|",
              f"| floor: `python -c 'import typer'` | {m['floor']:.1f} ms | 1.00x | {c['floor']:.1f} ms | 1.00x |",
              f"| `agentmsg send --to reviewer --body ... --json` (durable, one recipient) | {m['send']:.1f} ms | "
              f"**{r['send']:.2f}x** ({verdict(r['send'])}) | {c['send']:.1f} ms | {cr['send']:.2f}x |",
              f"| `agentmsg status --collab ... --json` | {m['status']:.1f} ms | **{r['status']:.2f}x** "
              f"({verdict(r['status'])}) | {c['status']:.1f} ms | {cr['status']:.2f}x |", "",
              f"In-process, after importing `agentmsg.cli.app`: building the whole command tree (28 commands) "
              f"{res['tree_ms']:.1f} ms; building only `send` {res['one_ms']:.1f} ms (median of 7 fresh processes)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=40, help="timed runs of each")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs first")
    ap.add_argument("--write-md", action="store_true", help="update the ## CLI start-up section of docs/BENCHMARKS.md")
    args = ap.parse_args()
    info = machine()
    res = run(args)
    if args.write_md:
        command = ".venv/bin/python bench/cli_bench.py --write-md" if args.repeats == 40 else \
            f".venv/bin/python bench/cli_bench.py --repeats {args.repeats} --write-md"
        write_section(REPO / "docs" / "BENCHMARKS.md", "CLI start-up", markdown(res, info, command))


if __name__ == "__main__":
    main()
