"""First use in the real Claude Code: the first ``agentmsg`` call and the plugin's MCP connection (issue 30, 6).

Usage::

    .venv/bin/python bench/first_use_bench.py [--write-md]

Everything in one run, on this machine, with the pinned Claude Code (node_modules) against the loopback stub
model and PyPI simulated by a wheelhouse packed from the test venv (tests/support/wheels.py: no download time
is in these figures; a real first use adds the download of about the sizes shown):

* the launcher alone in a fresh HOME: ``agentmsg version`` building the private venv (the CLI's four
  dependencies), the same call once it is built, and the venv's size before and after the MCP SDK;
* Claude Code, plugin installed per README into a fresh HOME, its first turn: the first ``agentmsg version``
  through the Bash tool, Claude Code's own "Successfully connected ... in N ms" for the plugin's MCP server,
  and the time until the tools are listed (the real server's ``tools/list_changed``);
* a second turn (the venv ready): the same figures, with the MCP front and without it
  (``AGENTMSG_MCP_FRONT=1`` makes the launcher run the SDK server directly, as before the front);
* a fresh HOME without the front: the connection as it was (build and SDK install before ``initialize``).

``--write-md`` replaces the ``## First use`` section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from tests.support import wheels  # noqa: E402
from tests.support.hosts import harness, product, stubs  # noqa: E402

DEPS = ("typer", "rich", "portalocker", "PyYAML", "mcp")
TIMED = 's=$(date +%s%N); agentmsg version >/dev/null; e=$(date +%s%N); echo "first_call_ms=$(( (e - s) / 1000000 ))"'


def du(path: Path) -> float:
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0]) / 1024


def mcp_log(home: Path) -> list[dict[str, Any]]:
    docs = []
    for f in sorted(home.glob(".cache/claude-cli-nodejs/*/mcp-logs-plugin-agentmsg-agentmsg/*.jsonl")):
        docs += [json.loads(line) for line in f.read_text().splitlines()]
    return docs


def stamp(doc: dict[str, Any]) -> float:
    return datetime.fromisoformat(doc["timestamp"].replace("Z", "+00:00")).timestamp()


def connection(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The last connection in Claude Code's MCP log: connected in N ms, tools listed after N ms, or why not."""
    starts = [i for i, d in enumerate(docs) if str(d.get("debug", "")).startswith("Starting connection")]
    docs = docs[starts[-1]:]
    out: dict[str, Any] = {"connected_ms": None, "tools_ms": None, "failed": None}
    for d in docs:
        text = d.get("debug") or d.get("error") or ""
        m = re.match(r"Successfully connected \(transport: stdio\) in (\d+)ms", text)
        if m:
            out["connected_ms"] = int(m[1])
        if "list_changed" in text:
            out["tools_ms"] = round((stamp(d) - stamp(docs[0])) * 1000)
        if "timed out" in text.lower() or "abandoned" in text.lower() or "failed" in text.lower():
            out["failed"] = out["failed"] or (text if len(text) <= 100 else text[:100].rsplit(" ", 1)[0] + " …")
    return out


def first_call(req: stubs.Recorded) -> int:
    return int(re.findall(r"first_call_ms=(\d+)", req.text_blob())[-1])


def claude_turn(base: Path, env: dict[str, str], replies: list[Any]) -> list[stubs.Recorded]:
    with stubs.AnthropicStub() as stub:
        stub.push(*replies)
        harness.run_claude("hello", cwd=base / "work", home=base / "home", stub=stub, env_extra=env,
                           session_id=str(uuid.uuid4()), timeout=600).check()
        return [r for r in stub.snapshot() if r.agent]


def fresh(base: Path, export: Path) -> None:
    (base / "work").mkdir(parents=True)
    harness.install_claude_plugin(export, "agentmsg", home=base / "home")


def measure(tmp: Path) -> dict[str, Any]:
    wheelhouse = wheels.wheelhouse(tmp / "wheelhouse", DEPS)
    pip = {"PATH": product.host_path(), **wheels.pip_env(wheelhouse)}
    export = product.export_plugin(tmp / "checkout")
    out: dict[str, Any] = {"load": " ".join(f"{x:.2f}" for x in os.getloadavg())}

    # the launcher alone
    home = tmp / "alone"
    env = harness.scrubbed_env(home, env_extra={**pip, "AGENTMSG_HOME": str(tmp / "state-alone")})
    launcher = ["/bin/sh", str(export / "bin" / "agentmsg"), "version"]
    for key in ("cli_build_ms", "cli_warm_ms"):
        t = time.perf_counter()
        subprocess.run(launcher, env=env, capture_output=True, check=True, timeout=600)
        out[key] = round((time.perf_counter() - t) * 1000)
    venv = home / ".local" / "share" / "agentmsg" / "venv"
    out["venv_cli_mb"] = du(venv)
    t = time.perf_counter()
    subprocess.run(["/bin/sh", str(export / "bin" / "agentmsg"), "mcp", "--help"],
                   env={**env, "AGENTMSG_MCP_FRONT": "1"},
                   capture_output=True, check=True, timeout=600)
    out["sdk_install_ms"] = round((time.perf_counter() - t) * 1000)
    out["venv_mcp_mb"] = du(venv)
    out["packages"] = len(list((venv / "lib").glob("python3*/site-packages/*.dist-info")))

    # Claude Code, first turn of a fresh machine, with the front
    base = tmp / "claude"
    fresh(base, export)
    logs = base / "home" / ".cache" / "claude-cli-nodejs" / "*" / "mcp-logs-plugin-agentmsg-agentmsg" / "*.jsonl"
    env = {**pip, "AGENTMSG_HOME": str(tmp / "state")}
    # the first tools/list answered empty at once: the tools come by tools/list_changed, which the turn waits for
    reqs = claude_turn(base, {**env, "AGENTMSG_MCP_LIST_WAIT": "0"}, [stubs.shell(TIMED),
                                   stubs.shell(f"until grep -qs tools/list_changed {logs}; do sleep 1; done"),
                                   stubs.text("done")])
    out["cold"] = {"first_call_ms": first_call(reqs[1]), **connection(mcp_log(base / "home"))}
    # second turns, the venv ready: with the front, then without it
    search = stubs.tool("ToolSearch", {"query": "select:mcp__plugin_agentmsg_agentmsg__inbox", "max_results": 5})
    for key, extra in (("warm", {}), ("warm_no_front", {"AGENTMSG_MCP_FRONT": "1"})):
        reqs = claude_turn(base, {**env, **extra}, [stubs.shell(TIMED), search, stubs.text("done")])
        conn = connection(mcp_log(base / "home"))
        conn["tools_listed"] = "mcp__plugin_agentmsg_agentmsg__inbox" in reqs[-1].text_blob()
        out[key] = {"first_call_ms": first_call(reqs[1]), **conn}

    # a fresh machine without the front: the connection as it was
    base = tmp / "claude-old"
    fresh(base, export)
    claude_turn(base, {**env, "AGENTMSG_MCP_FRONT": "1"}, [stubs.shell(TIMED), stubs.text("done")])
    out["cold_no_front"] = connection(mcp_log(base / "home"))
    return out


def render(r: dict[str, Any]) -> str:
    load = r["load"]
    cold, warm, old, cold_old = r["cold"], r["warm"], r["warm_no_front"], r["cold_no_front"]
    gone = cold_old["failed"] or f"connected in {cold_old['connected_ms']} ms"
    rows = "\n".join(f"| {name} | {value} |" for name, value in (
        ("launcher alone, fresh HOME: first `agentmsg version` (builds the venv: typer, rich, portalocker, pyyaml)",
         f"{r['cli_build_ms']} ms"),
        ("the same call, venv built", f"{r['cli_warm_ms']} ms"),
        ("the MCP SDK added to it (first `agentmsg mcp`)", f"{r['sdk_install_ms']} ms"),
        (f"venv size: CLI dependencies / with the MCP SDK ({r['packages']} distributions)",
         f"{r['venv_cli_mb']:.0f} MB / {r['venv_mcp_mb']:.0f} MB"),
        ("Claude Code, first turn of the machine: first `agentmsg version` in the Bash tool",
         f"{cold['first_call_ms']} ms"),
        ("its MCP connection, \"Successfully connected in\" (the front answers `initialize`)",
         f"{cold['connected_ms']} ms"),
        ("its MCP tools listed (`tools/list_changed` from the real server, build and SDK done)",
         f"{cold['tools_ms']} ms"),
        ("second turn, venv ready: `agentmsg version` in the Bash tool", f"{warm['first_call_ms']} ms"),
        ("its MCP connection, with the front / without it (the SDK server answers `initialize` itself)",
         f"{warm['connected_ms']} ms / {old['connected_ms']} ms"),
        ("Claude Code's MCP log without the front, venv ready", old["failed"] or "-"),
        ("first turn of a fresh machine without the front (the build before `initialize`)", gone)))
    return f"""## First use

Reproduce: `.venv/bin/python bench/first_use_bench.py --write-md` (the pinned Claude Code against the stub
model; PyPI simulated by a local wheelhouse, so no download time is included: on a real first use add the
download of the sizes below). One run, every figure from it; nproc {os.cpu_count()}, load at start {load}.

| measurement | figure |
|---|---:|
{rows}

With the front, Claude Code's connection on the machine's first use takes {cold['connected_ms']} ms, \
{cold['connected_ms'] / 30000:.2f}x its 30 000 ms connection timeout; the tools follow \
{cold['tools_ms'] / 1000:.0f} s later through `tools/list_changed`. Once ready, the connection is \
{warm['connected_ms'] / max(old['connected_ms'], 1):.2f}x the SDK server's own. `claude -p` does not wait for a \
plugin's MCP server: its first request lists the server as still connecting either way, and ToolSearch waits for it.
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write-md", action="store_true")
    ap.add_argument("--from-json", help="render the figures a previous run printed (its JSON) instead of measuring")
    args = ap.parse_args()
    if args.from_json:
        result = json.loads(Path(args.from_json).read_text())
    else:
        with tempfile.TemporaryDirectory(prefix="first-use-bench-") as tmp:
            result = measure(Path(tmp))
    print(json.dumps(result, indent=1))
    text = render(result)
    print(text)
    if args.write_md:
        doc = REPO / "docs" / "BENCHMARKS.md"
        old = doc.read_text()
        if "## First use\n" in old:
            head, rest = old.split("## First use\n", 1)
            tail = rest[rest.index("\n## "):] if "\n## " in rest else "\n"
            new = head + text + tail
        else:
            new = old.rstrip("\n") + "\n\n" + text
        doc.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
