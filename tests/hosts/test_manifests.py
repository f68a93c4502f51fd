"""One manifest, many hosts: the top-level plugin.json is the single source of name, version and description,
and every host manifest present in the repository agrees with it (scripts/sync_manifests.py restores it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import agentmsg
from tests.support.helpers_hooks import REPO

SHARED = ("name", "version", "description")
SKIP = {"node_modules", ".git", ".venv", "build", "dist", "tests"}


def _walk(root: Path) -> list[Path]:
    out = []
    for path in root.iterdir():
        if path.name in SKIP or path.is_symlink():
            continue
        if path.is_dir():
            out += _walk(path)
        else:
            out.append(path)
    return out


def host_manifests() -> list[Path]:
    """Every host manifest in the tree: plugin.json files below the top, *-extension.json (Gemini), and an
    OpenCode plugin's package.json or plugin.json, wherever it appears."""
    found = []
    for path in _walk(REPO):
        rel = path.relative_to(REPO)
        if rel == Path("plugin.json") or path.suffix != ".json":
            continue
        if path.name == "plugin.json" or path.name.endswith("-extension.json") or (
                "opencode" in str(rel).lower() and path.name in ("package.json", "plugin.json")):
            found.append(path)
    return sorted(found)


def test_the_top_level_manifest_is_the_package():
    top = json.loads((REPO / "plugin.json").read_text())
    assert top["name"] == "agentmsg" and top["version"] == agentmsg.__version__
    assert isinstance(top["description"], str) and 0 < len(top["description"]) <= 400


def test_every_host_manifest_agrees_with_plugin_json():
    top = json.loads((REPO / "plugin.json").read_text())
    found = host_manifests()
    rels = {str(p.relative_to(REPO)) for p in found}
    assert {".claude-plugin/plugin.json", ".codex-plugin/plugin.json", ".plugin/plugin.json",
            "gemini-extension.json"} <= rels, rels
    for path in found:
        doc = json.loads(path.read_text())
        for key in SHARED:
            assert doc.get(key) == top[key], f"{path.relative_to(REPO)}: {key} differs from plugin.json"


def test_marketplace_entries_carry_the_same_description():
    top = json.loads((REPO / "plugin.json").read_text())
    for rel in (".claude-plugin/marketplace.json", ".agents/plugins/marketplace.json"):
        (entry,) = json.loads((REPO / rel).read_text())["plugins"]
        assert (entry["name"], entry["description"]) == (top["name"], top["description"]), rel


def test_sync_script_reports_a_drifted_manifest(tmp_path):
    """The generator finds a manifest that drifted (run on a copy: the repository is never written)."""
    for rel in ("plugin.json", "scripts/sync_manifests.py", ".claude-plugin/plugin.json", "gemini-extension.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((REPO / rel).read_text())
    script = tmp_path / "scripts" / "sync_manifests.py"
    ok = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0 and ok.stdout == ""
    gem = tmp_path / "gemini-extension.json"
    gem.write_text(json.dumps(dict(json.loads(gem.read_text()), version="9.9.9")))
    bad = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 1 and bad.stdout == "differs: gemini-extension.json\n"
    subprocess.run([sys.executable, str(script)], check=True, capture_output=True, timeout=30)
    assert json.loads(gem.read_text())["version"] == agentmsg.__version__
    assert json.loads(gem.read_text())["contextFileName"] == "GEMINI.md"  # the host's own keys stay
