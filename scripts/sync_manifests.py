#!/usr/bin/env python3
"""Copy name, version and description from the top-level ``plugin.json`` (the one source of truth) into every
host's manifest, keeping each manifest's own keys.  ``--check`` only reports what differs (exit 1).

tests/hosts/test_manifests.py is what guards the agreement; this script is how to restore it after an edit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = ("name", "version", "description")
#: Every host manifest that carries the shared fields (written only where it exists, except the ones we own).
MANIFESTS = (".claude-plugin/plugin.json", ".codex-plugin/plugin.json", ".plugin/plugin.json",
             "gemini-extension.json", "opencode/package.json", "opencode/plugin.json", "package.opencode.json")


#: Marketplace files: their agentmsg entry carries the description too.
MARKETPLACES = (".claude-plugin/marketplace.json", ".agents/plugins/marketplace.json")


def source() -> dict[str, str]:
    doc = json.loads((REPO / "plugin.json").read_text(encoding="utf-8"))
    return {key: doc[key] for key in SHARED}


def present() -> list[Path]:
    return [REPO / rel for rel in MANIFESTS if (REPO / rel).is_file()]


def main(argv: list[str]) -> int:
    want = source()
    stale = []
    for path in present():
        doc = json.loads(path.read_text(encoding="utf-8"))
        if all(doc.get(k) == v for k, v in want.items()):
            continue
        stale.append(path.relative_to(REPO))
        if "--check" not in argv:
            doc.update(want)
            path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for rel in MARKETPLACES:
        path = REPO / rel
        if not path.is_file():
            continue
        doc = json.loads(path.read_text(encoding="utf-8"))
        entries = [e for e in doc.get("plugins", []) if isinstance(e, dict) and e.get("name") == want["name"]]
        if all(e.get("description") == want["description"] for e in entries):
            continue
        stale.append(path.relative_to(REPO))
        if "--check" not in argv:
            for e in entries:
                e["description"] = want["description"]
            path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for rel in stale:
        print(f"{'differs' if '--check' in argv else 'updated'}: {rel}")
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
