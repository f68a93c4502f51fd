"""Trust, round three, class 9: secret formats that were still stored.

Through the real CLI (`agentmsg send` as a subprocess), a body holding:

* a Twilio API key SID (``SK`` + 32 hex) next to its secret, a Databricks
  token, a HashiCorp Vault token (``hvs.``, ``hvb.``, legacy ``s.``);
* a secret wrapped once in base64 (standard or URL-safe, padded or not,
  on one line or wrapped, inside JSON) or percent-encoded;

is refused with the one line every found secret gets (exit 11, nothing
stored), and with ``--redact`` is stored with exactly the encoded source
replaced by ``[REDACTED:<kind>]``. Ordinary bodies that merely look
encoded (git object ids, UUIDs, base64 of harmless text, image data,
percent-encoded URLs, code) are stored unchanged.

Secret-shaped values are assembled at run time from seeded random
characters, as in tests/text/test_secrets.py.
"""

from __future__ import annotations

import base64
import json
import random
import string
import textwrap
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.support.cli_helpers import run, run_json, snapshot
from tests.support.pins import DRIVER_PIN, REVIEWER_PIN

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
BEGIN, END = "-----" + "BEGIN", "-----" + "END"


def rnd(alphabet: str, n: int, seed: int) -> str:
    r = random.Random(seed)
    return "".join(r.choice(alphabet) for _ in range(n))


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


PEM = (f"{BEGIN} RSA PRIVATE KEY-----\n" + "\n".join(rnd(B64, 64, 10 + i) for i in range(6))
       + f"\n{END} RSA PRIVATE KEY-----\n")
GHP = "gh" + "p_" + rnd(ALNUM, 36, 20)
TWILIO_SID, TWILIO_SECRET = "SK" + rnd(HEX, 32, 21), rnd(ALNUM, 32, 22)
DATABRICKS = "da" + "pi" + rnd(HEX, 32, 23)
VAULT = "hv" + "s." + rnd(ALNUM + "_-", 91, 24)
VAULT_BATCH = "hv" + "b." + rnd(ALNUM + "_-", 138, 25)
VAULT_LEGACY = "s." + rnd(ALNUM, 24, 26)

# name -> (body, kind, line, the body --redact stores)
REFUSED: dict[str, tuple[str, str, int, str]] = {
    "twilio-sid-colon-secret": (f"twilio creds {TWILIO_SID}:{TWILIO_SECRET}", "twilio-api-key", 1,
                                f"twilio creds {TWILIO_SID}:[REDACTED:twilio-api-key]"),
    "twilio-sid-then-secret-line": (f"twilio:\n  sid: {TWILIO_SID}\n  secret: {TWILIO_SECRET}\n", "twilio-api-key", 3,
                                    f"twilio:\n  sid: {TWILIO_SID}\n  secret: [REDACTED:twilio-api-key]\n"),
    "databricks-with-suffix": (f"databricks token {DATABRICKS}-2 for the job", "databricks-token", 1,
                               "databricks token [REDACTED:databricks-token] for the job"),
    "vault-service": (f"export VAULT_TOKEN={VAULT}", "vault-token", 1, "export VAULT_TOKEN=[REDACTED:vault-token]"),
    "vault-batch": (f"batch token:\n{VAULT_BATCH}", "vault-token", 2, "batch token:\n[REDACTED:vault-token]"),
    "vault-legacy": (f"vault login {VAULT_LEGACY}", "vault-token", 1, "vault login [REDACTED:vault-token]"),
    # one layer of base64
    "k8s-secret-tls-key": (f"apiVersion: v1\nkind: Secret\ndata:\n  tls.key: {b64(PEM)}\n", "private-key", 4,
                           "apiVersion: v1\nkind: Secret\ndata:\n  tls.key: [REDACTED:private-key]\n"),
    "pem-base64-wrapped-76": ("the key, base64:\n" + "\n".join(textwrap.wrap(b64(PEM), 76)) + "\nthanks",
                              "private-key", 2, "the key, base64:\n[REDACTED:private-key]\nthanks"),
    "pem-base64-indented-64": ("key: |\n" + "\n".join("  " + ln for ln in textwrap.wrap(b64(PEM), 64)) + "\n",
                               "private-key", 2, "key: |\n  [REDACTED:private-key]\n"),
    "pem-base64-urlsafe-unpadded": (base64.urlsafe_b64encode(PEM.encode()).decode().rstrip("=") + " (urlsafe)",
                                    "private-key", 1, "[REDACTED:private-key] (urlsafe)"),
    "pem-base64-in-json": ('{"key": "' + "\\n".join(textwrap.wrap(b64(PEM), 64)) + '"}', "private-key", 1,
                           '{"key": "[REDACTED:private-key]"}'),
    "token-base64": (f"config blob {b64('GITHUB_TOKEN=' + GHP)} attached", "github-token", 1,
                     "config blob [REDACTED:github-token] attached"),
    "vault-token-base64": (f"VAULT_B64={b64(VAULT)}", "vault-token", 1, "VAULT_B64=[REDACTED:vault-token]"),
    # one layer of percent encoding
    "pem-percent-encoded": (f"curl -d key={quote(PEM.strip(), safe='')} https://x.example/upload", "private-key", 1,
                            "curl -d key=[REDACTED:private-key] https://x.example/upload"),
    "token-percent-in-redirect": (f"open https://app.example/login?next=%2Fcb%3Ftoken%3D{GHP}%26x%3D1",
                                  "github-token", 1,
                                  "open https://app.example/login?next=%2Fcb%3Ftoken%3D[REDACTED:github-token]"
                                  "%26x%3D1"),
    "twilio-percent-encoded": (f"u=https%3A%2F%2F{TWILIO_SID}%3A{TWILIO_SECRET}%40api.twilio.com", "twilio-api-key",
                               1, f"u=https%3A%2F%2F{TWILIO_SID}%3A[REDACTED:twilio-api-key]%40api.twilio.com"),
}

IMAGE = "![x](data:image/png;base64," + base64.b64encode(random.Random(30).randbytes(3000)).decode() + ")"
PROSE = "The build is green again. I rebased on main and reran the flaky test; please review when you can."
CLEAN: dict[str, str] = {
    "git-object-ids": "\n".join(f"{rnd(HEX, 40, 40 + i)} fix {i}" for i in range(20)),
    "uuids": " ".join(str(uuid.UUID(int=random.Random(50 + i).getrandbits(128), version=4)) for i in range(20)),
    "base64-of-prose": b64(PROSE),
    "base64-of-prose-wrapped": "\n".join(textwrap.wrap(b64(PROSE * 4), 76)),
    "base64-of-config": b64(json.dumps({"name": "web", "replicas": 3, "image": "nginx:1.27"})),
    "image-data": IMAGE,
    "integrity": '"integrity": "sha512-' + base64.b64encode(random.Random(31).randbytes(64)).decode() + '"',
    "percent-url": "see https://example.com/search?q=hello%20world%21&lang=en%2Dus and 100% sure",
    "code": "def some_long_function_name_here(another_quite_long_identifier_name):\n"
            "    return s.getElementsByTagName(another_quite_long_identifier_name)\n",
    "twilio-sid-alone": f"rotate key {TWILIO_SID} tomorrow; account AC{rnd(HEX, 32, 32)} stays",
    "base64-of-placeholder": b64("password = changeme\ntoken: <your-token>\n"),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, str]]:
    base = tmp_path_factory.mktemp("secret-formats")
    root, env = base / "state", {"HOME": str(base)}
    code, doc, err = run_json("open", "--self", DRIVER_PIN, "--alias", "driver", "--label", "s", "--task", "t",
                              root=root, env=env)
    assert code == 0, err
    collab = doc["result"]["collab"]
    code, _doc, err = run_json("join", "--collab", collab, "--self", REVIEWER_PIN, "--alias", "reviewer",
                               root=root, env=env)
    assert code == 0, err
    return root, collab, env


def _journals(root: Path) -> dict[str, Any]:
    return {k: v for k, v in snapshot(root).items() if k.endswith(".jsonl")}


def _send(world: tuple[Path, str, dict[str, str]], body: str, *extra: str) -> tuple[int, str, str]:
    root, collab, env = world
    return run("send", "--collab", collab, "--self", DRIVER_PIN, "--to", "reviewer", "--subject", "s",
               "--body", body, "--json", *extra, root=root, env=env)


def _stored_body(world: tuple[Path, str, dict[str, str]], out: str) -> str:
    root, collab, env = world
    mid = json.loads(out)["result"]["results"][0]["id"]
    code, doc, err = run_json("show", mid, "--collab", collab, root=root, env=env)
    assert code == 0, err
    body = doc["result"]["message"]["body"]
    assert isinstance(body, str)
    return body


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_like_every_found_secret(world: tuple[Path, str, dict[str, str]], name: str) -> None:
    body, kind, line, _redacted = REFUSED[name]
    before = _journals(world[0])
    code, out, err = _send(world, body)
    assert code == 11, (out, err)
    assert json.loads(out)["error"]["message"] == f"REFUSED(secret): {kind} at line {line}"
    assert _journals(world[0]) == before


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_redact_replaces_exactly_the_encoded_source(world: tuple[Path, str, dict[str, str]], name: str) -> None:
    body, _kind, _line, redacted = REFUSED[name]
    code, out, err = _send(world, body, "--redact")
    assert code == 0, err
    assert json.loads(out)["result"]["redacted"] == 1
    assert _stored_body(world, out) == redacted


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_ordinary_bodies_are_stored_unchanged(world: tuple[Path, str, dict[str, str]], name: str) -> None:
    code, out, err = _send(world, CLEAN[name])
    assert code == 0, (out, err)
    assert _stored_body(world, out) == CLEAN[name]
