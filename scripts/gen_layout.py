#!/usr/bin/env python3
"""Generate what other files say of the state root's layout from its one owner, ``agentmsg/backends/file/layout.py``.

* docs/ARCHITECTURE.md's tree (between ``<!-- layout:start -->`` and ``<!-- layout:end -->``);
* hooks/run's names (between ``# layout:start`` and ``# layout:end``): the shell launcher spells no marker
  or file name of its own.

    python scripts/gen_layout.py            # print both
    python scripts/gen_layout.py --write    # replace both in place
    python scripts/gen_layout.py --check    # exit 1 if either is stale (tests/docs/test_house.py runs it)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from agentmsg.backends.file import layout  # noqa: E402

DOC = REPO_ROOT / "docs" / "ARCHITECTURE.md"
RUN = REPO_ROOT / "hooks" / "run"
DOC_MARKS = ("<!-- layout:start -->", "<!-- layout:end -->")
RUN_MARKS = ("# layout:start (scripts/gen_layout.py writes this block from agentmsg/backends/file/layout.py)",
             "# layout:end")
#: The names hooks/run uses, as sh variables.
SH_NAMES = {"L_IDLE": layout.IDLE, "L_GEN": layout.GEN, "L_IDLE_MARK": layout.IDLE_MARK, "L_MID": layout.MID,
            "L_STOP": layout.STOP, "L_READY": layout.READY, "L_TOOK": layout.TOOK, "L_FOLD": layout.FOLD,
            "L_FULL": layout.FULL, "L_FACTS": layout.FACTS,
            "L_HELPER_PID": layout.HELPER_PID, "L_TURN": layout.TURN, "L_REST": layout.REST,
            "L_HOOKS_LOG": layout.HOOKS_LOG, "L_CLAIMS": layout.CLAIMS,
            "L_PINS": layout.PINS, "L_SOLO": layout.SOLO}


def tree() -> str:
    """The state root as an indented tree: each file with its role, who writes it, who reads it."""
    rows: list[tuple[str, str]] = [("ROOT/", "0700")]
    seen: set[str] = set()
    for path, role, writer, reader, what in layout.FILES:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder not in seen:
                seen.add(folder)
                rows.append(("  " * depth + parts[depth - 1] + "/", ""))
        rows.append(("  " * len(parts) + parts[-1], f"{role}: {what} ({writer} -> {reader})"))
    width = max(len(name) for name, _ in rows) + 2
    return "\n".join(f"{name:<{width}}{note}".rstrip() for name, note in rows)


def doc_block() -> str:
    return f"{DOC_MARKS[0]}\n```\n{tree()}\n```\n{DOC_MARKS[1]}"


def run_block() -> str:
    lines = [f"{name}={value}" for name, value in SH_NAMES.items()]
    return "\n".join([RUN_MARKS[0], *lines, RUN_MARKS[1]])


def _replace(text: str, marks: tuple[str, str], block: str) -> str:
    start, end = text.index(marks[0]), text.index(marks[1]) + len(marks[1])
    return text[:start] + block + text[end:]


def stale() -> list[Path]:
    return [path for path, marks, block in ((DOC, DOC_MARKS, doc_block()), (RUN, RUN_MARKS, run_block()))
            if _replace(path.read_text(), marks, block) != path.read_text()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    if args.check:
        old = stale()
        for path in old:
            print(f"{path.relative_to(REPO_ROOT)} is stale: python scripts/gen_layout.py --write", file=sys.stderr)
        return 1 if old else 0
    if args.write:
        for path, marks, block in ((DOC, DOC_MARKS, doc_block()), (RUN, RUN_MARKS, run_block())):
            path.write_text(_replace(path.read_text(), marks, block))
        return 0
    print(doc_block())
    print(run_block())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
