"""The CLI's hot path stays light: a command builds only itself and imports only what it uses.

docs/BENCHMARKS.md ("CLI start-up") has the measurements; these tests pin the
behaviour that makes them (which modules load, which commands get built),
never a timing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.cli_helpers import REPO_ROOT
from tests.support.pins import DRIVER_PIN

#: Never on the path of ``status``: typer 0.29's pydantic, rich (TTY tables only), PyYAML (``registry``
#: only), portalocker (importlib.metadata; flock is used on POSIX) and the secret scanner (writes only).
HEAVY = ("pydantic", "rich", "yaml", "portalocker", "importlib.metadata", "agentmsg.text.secrets")

PROBE = """
import json, sys
from agentmsg.cli.main import main
code = main(sys.argv[1:])
sys.stdout.flush()
print("\\nMODULES " + json.dumps(sorted(sys.modules)))
sys.exit(code)
"""


def _modules(tmp_path: Path, *args: str) -> tuple[int, set[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMSG_", "CLAUDE", "CODEX"))}
    env.update(PYTHONPATH=str(REPO_ROOT), HOME=str(tmp_path), AGENTMSG_HOME=str(tmp_path / "state"),
               TERM="dumb")
    done = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, capture_output=True, text=True,
                          timeout=60, check=False, stdin=subprocess.DEVNULL)
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("MODULES "))
    return done.returncode, set(json.loads(line[len("MODULES "):]))


def _heavy(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_status_imports_neither_pydantic_nor_rich(tmp_path: Path) -> None:
    code, mods = _modules(tmp_path, "status", "--self", DRIVER_PIN, "--json")
    assert code == 0
    assert _heavy(mods) == []
    assert "typer" in mods  # the probe really ran the CLI


def test_status_in_a_collaboration_stays_light(tmp_path: Path) -> None:
    env_root = ["--root", str(tmp_path / "state")]
    code, _ = _modules(tmp_path, "open", "--alias", "driver", "--label", "l", "--task", "t", "--self", DRIVER_PIN,
                       *env_root, "--json")
    assert code == 0
    code, mods = _modules(tmp_path, "status", "--self", DRIVER_PIN, *env_root, "--json")
    assert code == 0
    assert _heavy(mods) == []
    assert "agentmsg.backends.file.store" in mods


def test_a_command_builds_only_itself() -> None:
    from agentmsg.cli.app import COMMANDS, GROUPS, one_command

    for name in COMMANDS:
        found = one_command([name, "--json"])
        assert found is not None
        cmd, prog, rest = found
        assert (cmd.name, prog, rest) == (name, f"agentmsg {name}", ["--json"])
        assert not hasattr(cmd, "commands")  # a single command, not a group holding the tree
    for group, commands in GROUPS.items():
        for name in commands:
            found = one_command([group, name])
            assert found is not None and found[1] == f"agentmsg {group} {name}"
    # no command, an option first, an unknown command, a bare or unknown group: the full tree answers
    for args in ([], ["--help"], ["nosuch"], ["log"], ["log", "nosuch"], ["log", "--help"], ["--json", "status"]):
        assert one_command(args) is None, args
