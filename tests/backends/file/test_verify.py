"""`verify` catches every single-record edit, deletion and swap.

The store is 10,000 records in the exact on-disk format (sealed and chained
by the same code the store uses); positions are drawn at random with a fixed
seed, plus the first and last record, where chains are weakest.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agentmsg import records
from agentmsg.backends.file.integrity import verify_file
from agentmsg.backends.file.journal import Journal

N = 10_000
TRIALS = 20


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    lines = []
    prev, prev_ts = "", None
    for seq in range(1, N + 1):
        rec = records.seal({"type": "message", "id": f"m{seq}", "body": f"body {seq}"},
                           seq=seq, prev=prev, prev_ts=prev_ts)
        prev, prev_ts = rec["sum"], rec["ts"]
        lines.append(records.encode(rec))
    return lines


def write(path: Path, lines: list[bytes], head_of: list[bytes]) -> Path:
    path.write_bytes(b"".join(lines))
    last = json.loads(head_of[-1])
    Journal(path).head_path.write_bytes(records.canonical({"seq": last["seq"], "sum": last["sum"]}))
    return path


def positions() -> list[int]:
    rng = random.Random(20261130)
    return sorted({0, N - 1, *rng.sample(range(N), TRIALS)})


def tampering(path: Path) -> list[tuple[int, str]]:
    return [(f.line, f.kind) for f in verify_file(path) if f.tampering]


def test_pristine_store_verifies_clean(tmp_path: Path, pristine: list[bytes]) -> None:
    assert verify_file(write(tmp_path / "inbox.jsonl", pristine, pristine)) == []


@pytest.mark.parametrize("pos", positions())
def test_edit_is_caught_at_its_line(tmp_path: Path, pristine: list[bytes], pos: int) -> None:
    lines = list(pristine)
    lines[pos] = lines[pos].replace(b'"body ', b'"BODY ')
    found = tampering(write(tmp_path / "inbox.jsonl", lines, pristine))
    assert (pos + 1, "edited") in found


@pytest.mark.parametrize("pos", positions())
def test_edit_with_recomputed_checksum_is_caught(tmp_path: Path, pristine: list[bytes], pos: int) -> None:
    rec = json.loads(pristine[pos])
    rec["body"] = "forged"
    rec["sum"] = records.checksum(rec)
    lines = list(pristine)
    lines[pos] = records.encode(rec)
    found = tampering(write(tmp_path / "inbox.jsonl", lines, pristine))
    assert (pos + 1, "edited") in found


@pytest.mark.parametrize("pos", positions())
def test_deletion_is_caught(tmp_path: Path, pristine: list[bytes], pos: int) -> None:
    lines = pristine[:pos] + pristine[pos + 1 :]
    found = tampering(write(tmp_path / "inbox.jsonl", lines, pristine))
    assert found, f"deleting record {pos + 1} went unnoticed"
    assert {kind for _, kind in found} <= {"removed", "truncated", "reordered"}
    assert min(line for line, _ in found) == pos + 1


@pytest.mark.parametrize("pos", positions())
def test_swap_is_caught(tmp_path: Path, pristine: list[bytes], pos: int) -> None:
    other = (pos + 1 + random.Random(pos).randrange(N - 1)) % N
    lines = list(pristine)
    lines[pos], lines[other] = lines[other], lines[pos]
    found = tampering(write(tmp_path / "inbox.jsonl", lines, pristine))
    assert found, f"swapping records {pos + 1} and {other + 1} went unnoticed"
    assert min(line for line, _ in found) == min(pos, other) + 1


def test_torn_tail_is_reported_as_torn_not_tampering(tmp_path: Path, pristine: list[bytes]) -> None:
    path = write(tmp_path / "inbox.jsonl", pristine[:100], pristine[:100])
    with path.open("ab") as fh:
        fh.write(pristine[100][:57])
    found = verify_file(path)
    assert [(f.line, f.kind, f.tampering) for f in found] == [(101, "torn", False)]


@pytest.fixture
def ann_and_bob(tmp_path: Path) -> tuple[Callable[..., subprocess.CompletedProcess[str]], Path]:
    """The real CLI over a fresh root where ann opened a collaboration and bob joined: (cli, its dir)."""
    env = {"AGENTMSG_HOME": str(tmp_path / "root"), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agentmsg.cli", *args, "--json"],
                              capture_output=True, text=True, env=env, check=False)

    collab = json.loads(cli("open", "--self", "human:ann", "--alias", "ann", "--label", "l",
                            "--task", "t").stdout)["result"]["collab"]
    assert cli("join", "--collab", collab, "--self", "human:bob", "--alias", "bob").returncode == 0
    return cli, tmp_path / "root" / "collabs" / collab


def test_cli_verify_exit_codes(ann_and_bob) -> None:
    """Through the real CLI: clean is 0, a torn tail alone is 0, an edit is 13."""
    cli, cdir = ann_and_bob
    cli("send", "--collab", cdir.name, "--self", "human:ann", "--to", "bob", "--subject", "s", "--body", "hello")
    assert cli("verify").returncode == 0

    inbox = cdir / "inbox" / "bob.jsonl"
    with inbox.open("ab") as fh:
        fh.write(b'{"seq": 2, "tor')
    torn = cli("verify")
    assert torn.returncode == 0
    assert json.loads(torn.stdout)["result"]["torn"] == 1

    inbox.write_bytes(inbox.read_bytes().replace(b"hello", b"HELLO"))
    tampered = cli("verify")
    assert tampered.returncode == 13
    doc = json.loads(tampered.stdout)
    assert doc["error"]["message"].startswith("verify: 1 problem(s); first: edited record at ")
    assert "Traceback" not in tampered.stderr


def test_cli_verify_catches_a_hand_edited_registry(ann_and_bob) -> None:
    """registry.yaml is a rendered view (nothing routes through it), but rebinding an alias in it is tampering."""
    cli, cdir = ann_and_bob
    assert cli("verify", "--collab", cdir.name).returncode == 0
    registry = cdir / "registry.yaml"
    registry.write_text(registry.read_text().replace('"human:bob"', '"human:mallory"'))
    done = cli("verify", "--collab", cdir.name)
    assert done.returncode == 13
    (finding,) = json.loads(done.stdout)["result"]["findings"]
    assert (finding["path"], finding["kind"], finding["tampering"]) == (str(registry), "edited", True)
