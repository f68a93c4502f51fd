"""Start-up of ``agentmsg mcp``: from spawning the server to the first tool response.

Usage::

    .venv/bin/python bench/mcp_bench.py [--repeats 15] [--write-md]

Per run: spawn ``python -m agentmsg.cli mcp --self ...`` over stdio with the
SDK's own client, initialize, call ``status`` once, and take the wall time
until that response arrives.  The baseline is the wall time of
``python -c 'import mcp'`` (the SDK's own import cost, which no server on it
can avoid), so the ratio says how much agentmsg adds on top.  Medians; the
runs alternate so machine load hits both alike.  ``--write-md`` replaces the
``## MCP server`` section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
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

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

PIN = "human:bench"


def machine() -> dict[str, str]:
    """As bench/store_bench.py reports it (that script still imports pre-refactor modules)."""
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), "?") if Path("/proc/cpuinfo").exists() else "?"
    return {"nproc": str(os.cpu_count()), "cpu": cpu, "python": platform.python_version(),
            "os": f"{platform.system()} {platform.release()}",
            "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg())}


def write_section(path: Path, title: str, section: str) -> None:
    """Replace (or add) the ``## <title>`` section, leaving every other section alone."""
    lines = (path.read_text() if path.exists() else "# Benchmarks\n").split("\n")
    start = next((i for i, ln in enumerate(lines) if ln.strip() == f"## {title}"), None)
    if start is None:
        text = "\n".join(lines).rstrip("\n") + "\n\n" + section
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        rest = "\n".join(lines[end:])
        text = "\n".join(lines[:start]).rstrip("\n") + "\n\n" + section + ("\n" + rest if rest else "")
    path.write_text(text)


def env_for(root: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMSG_")}
    env["AGENTMSG_HOME"] = root
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def first_response(root: str) -> float:
    params = StdioServerParameters(command=sys.executable, args=["-m", "agentmsg.cli", "mcp", "--self", PIN],
                                   env=env_for(root))

    async def main() -> float:
        start = time.perf_counter()
        async with Client(params) as client:
            result = await client.call_tool("status", {})
            took = time.perf_counter() - start
            assert not result.is_error, result
        return took

    return anyio.run(main)


def import_mcp(root: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import mcp"], env=env_for(root), check=True)
    return time.perf_counter() - start


def bare_python(root: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env_for(root), check=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--write-md", action="store_true", help="update the ## MCP server section of docs/BENCHMARKS.md")
    args = ap.parse_args()
    import mcp  # noqa: F401  (warm the page cache for both sides)

    with tempfile.TemporaryDirectory() as root:
        subprocess.run([sys.executable, "-m", "agentmsg.cli", "open", "--alias", "bench", "--label", "b",
                        "--task", "bench", "--self", PIN], env=env_for(root), check=True, capture_output=True)
        first_response(root)
        server, baseline, bare = [], [], []
        for _ in range(args.repeats):
            server.append(first_response(root))
            baseline.append(import_mcp(root))
            bare.append(bare_python(root))
    med_s, med_b, med_p = (statistics.median(x) for x in (server, baseline, bare))
    info = machine()
    lines = [
        "## MCP server", "",
        f"Reproduce: `.venv/bin/python bench/mcp_bench.py --repeats {args.repeats} --write-md`", "",
        *[f"- {k}: {v}" for k, v in info.items()], "",
        f"| measurement (median of {args.repeats} runs) | wall time |", "|---|---:|",
        f"| `python -c pass` | {med_p * 1e3:.0f} ms |",
        f"| `python -c 'import mcp'` (baseline) | {med_b * 1e3:.0f} ms |",
        f"| spawn `agentmsg mcp` → initialize → first `status` response | {med_s * 1e3:.0f} ms |", "",
        f"Start-up to the first tool response is **{med_s / med_b:.2f}x** `import mcp`. The rest is the SDK's "
        "server modules (pydantic models, anyio, the stdio transport), the client handshake, agentmsg's CLI "
        "import (typer) and one `status` against the file store.", "",
    ]
    md = "\n".join(lines)
    print(md)
    if args.write_md:
        write_section(REPO / "docs" / "BENCHMARKS.md", "MCP server", md)


if __name__ == "__main__":
    main()
