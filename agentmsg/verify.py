"""Walk every record file and report what does not add up.

Each record's checksum catches an edited line; each ``prev`` link and the
gap-free ``seq`` catch removed and reordered lines; the ``.head`` sidecar
catches records cut off the end.  A torn line (a crash mid-write) is
reported as torn, not as tampering: it never parses, and the records
around it still chain.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from . import fsio, mailbox, records
from .journal import Journal


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    kind: str  # edited | removed | reordered | truncated | torn | damaged
    detail: str

    @property
    def tampering(self) -> bool:
        return self.kind != "torn"


def journals(root: Path, collab: str | None = None) -> Iterator[Path]:
    base = fsio.existing_dir(root, "collabs")
    if base is None:
        return
    for cdir in sorted(base.iterdir()) if collab is None else [base / collab]:
        fsio.existing_dir(base, cdir.name)
        mailbox.collab_dir(root, cdir.name)  # a symlinked subdirectory is refused, not skipped
        yield from sorted(p for p in cdir.rglob("*.jsonl") if not p.is_symlink())


def verify_file(path: Path) -> list[Finding]:
    found: list[Finding] = []
    prev_sum = ""
    prev_seq = 0
    name = str(path)
    rows = [(n, line, complete, records.peek(line))
            for n, (_pos, line, complete) in enumerate(fsio.lines(path), start=1) if line]
    present = {rec["seq"] for *_, rec in rows if rec is not None}
    for number, _line, complete, rec in rows:
        if rec is None:
            where = "at the end" if not complete else "mid-file, after which writing continued"
            found.append(Finding(name, number, "torn", f"incomplete record {where} (crash mid-write)"))
            continue
        seq = rec["seq"]
        if rec["sum"] != records.checksum(rec):
            found.append(Finding(name, number, "edited", f"checksum mismatch on seq {seq}"))
        elif seq == prev_seq + 1 and rec.get("prev") != prev_sum:
            found.append(Finding(name, number - 1, "edited",
                                 f"seq {prev_seq} changed after seq {seq} was chained to it"))
        elif seq != prev_seq + 1 or rec.get("prev") != prev_sum:
            missing = [s for s in range(prev_seq + 1, seq) if s not in present]
            kind = "removed" if seq > prev_seq and len(missing) == seq - prev_seq - 1 else "reordered"
            found.append(Finding(name, number, kind, f"seq {seq} follows seq {prev_seq}"))
        prev_sum, prev_seq = rec["sum"], seq
    found += _check_head(path, prev_seq, prev_sum, len(rows))
    return found


def _check_head(path: Path, last_seq: int, last_sum: str, lines: int) -> list[Finding]:
    """The sidecar may lag the file after a crash, but never lead it."""
    head = Journal(path).head()
    if not head or not isinstance(head.get("seq"), int):
        return []
    if head["seq"] > last_seq:
        return [Finding(str(path), lines + 1, "truncated",
                        f"last record is seq {last_seq} but seq {head['seq']} was written")]
    if head["seq"] == last_seq and head.get("sum") != last_sum:
        return [Finding(str(path), lines, "edited", f"seq {last_seq} differs from the one written")]
    return []


def check_registry(cdir: Path) -> list[Finding]:
    """``registry.yaml`` is derived, but recipients resolve through it: it must equal the replay."""
    from . import model

    reg = None
    for _, ev in Journal(cdir / "collab.jsonl").scan():
        reg = model.apply_event(reg, ev)
    actual = mailbox.registry_document(cdir)  # None when stale: then it is replayed, never trusted
    if reg is None or actual is None or {k: v for k, v in actual.items() if k != "built_from"} == \
            model.registry_document(reg):
        return []
    return [Finding(str(cdir / "registry.yaml"), 1, "edited",
                    "differs from the registry replayed from collab.jsonl (recipients resolve through it)")]


def verify(root: Path, collab: str | None = None) -> tuple[int, list[Finding]]:
    """(files checked, findings) for the whole root or one collaboration."""
    files = list(journals(root, collab))
    findings = [f for path in files for f in verify_file(path)]
    for cdir in sorted({path.parent for path in files if path.name == "collab.jsonl"}):
        findings += check_registry(cdir)
    return len(files), findings


def as_dict(f: Finding) -> dict[str, object]:
    return {"path": f.path, "line": f.line, "kind": f.kind, "detail": f.detail, "tampering": f.tampering}

