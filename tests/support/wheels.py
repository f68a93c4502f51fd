"""A local wheelhouse standing in for PyPI: wheels repacked from the test venv's installed distributions (offline).

The launcher's pip (bin/agentmsg) is pointed at it with ``PIP_NO_INDEX=1``, ``PIP_FIND_LINKS=<wheelhouse>`` and
``PIP_CONFIG_FILE=/dev/null`` (:func:`pip_env`), so the machine's own pip configuration plays no part.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata as md
import io
import os
import re
import zipfile
from pathlib import Path

# --------------------------------------------------------------------------


def closure(names: tuple[str, ...]) -> list[md.Distribution]:
    """The installed distributions ``names`` need on this platform, with the extras their dependents ask for."""
    from packaging.requirements import Requirement

    seen: dict[str, md.Distribution] = {}
    done: set[tuple[str, str]] = set()
    todo = [(name, "") for name in names]
    while todo:
        name, extra = todo.pop()
        dist = md.distribution(name)
        key = dist.metadata["Name"].lower().replace("_", "-")
        if (key, extra) in done:
            continue
        done.add((key, extra))
        seen[key] = dist
        for req in dist.requires or ():
            parsed = Requirement(req)
            if parsed.marker is None or parsed.marker.evaluate({"extra": extra}):
                todo += [(parsed.name, e) for e in ("", *parsed.extras)]
    return list(seen.values())


def repack(dist: md.Distribution, dest: Path) -> Path:
    """A wheel of an installed distribution, from its RECORD (offline; console scripts left out)."""
    info = next(f for f in dist.files or () if f.parts[0].endswith(".dist-info"))
    tags = [line.split(":", 1)[1].strip().split("-") for line in (dist.read_text("WHEEL") or "").splitlines()
            if line.startswith("Tag:")]
    tag = "-".join(".".join(dict.fromkeys(t[i] for t in tags)) for i in range(3))  # py2.py3-none-any
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    whl = dest / f"{name}-{dist.version}-{tag}.whl"
    skip = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
    rows = []
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in dist.files or ():
            if f.parts[0] == ".." or "__pycache__" in f.parts or (f.parts[0] == info.parts[0] and f.name in skip):
                continue
            data = Path(str(dist.locate_file(f))).read_bytes()
            zf.writestr(f.as_posix(), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append((f.as_posix(), f"sha256={digest}", str(len(data))))
        record = f"{info.parts[0]}/RECORD"
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([*rows, (record, "", "")])
        zf.writestr(record, out.getvalue())
    return whl



def wheelhouse(dest: Path, names: tuple[str, ...]) -> Path:
    """``dest`` holding a wheel of each of ``names`` and of everything they require."""
    dest.mkdir(parents=True, exist_ok=True)
    for dist in closure(names):
        repack(dist, dest)
    return dest


def pip_env(wheelhouse: Path) -> dict[str, str]:
    """pip's own variables: install from ``wheelhouse`` only."""
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse), "PIP_CONFIG_FILE": os.devnull,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
