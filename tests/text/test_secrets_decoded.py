"""One layer of encoding in agentmsg.text.secrets: base64 and percent encoding (docs/SECRETS.md, "Encoded secrets").

A secret wrapped once is found under its own kind and the finding covers
the encoded source; harmless text that merely looks encoded stays quiet;
the work stays bounded. Secret-shaped values are built at run time.
"""

from __future__ import annotations

import base64
import json
import random
import textwrap
import time
import uuid
from urllib.parse import quote

import pytest

from agentmsg.text import secrets
from agentmsg.text.secrets import redact, scan
from tests.text.test_secrets import ALNUM, HEX, aws, gh, jwt, pem, rnd, sk

PEM = pem("RSA PRIVATE", 700, 6) + "\n"
PASSWORD = "pass" + "word"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def urlsafe(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


# (text, kind, the exact span the finding covers)
ENCODED: list[tuple[str, str, str]] = [
    (f"tls.key: {b64(PEM)}", "private-key", b64(PEM)),
    (f"tls.key: {b64(PEM).rstrip('=')}", "private-key", b64(PEM).rstrip("=")),
    (f"k={urlsafe(PEM)};", "private-key", urlsafe(PEM)),
    ("\n".join(textwrap.wrap(b64(PEM), 76)), "private-key", "\n".join(textwrap.wrap(b64(PEM), 76))),
    ("\n".join("    " + ln for ln in textwrap.wrap(b64(PEM), 64)), "private-key",
     "\n    ".join(textwrap.wrap(b64(PEM), 64))),
    ("\r\n".join(textwrap.wrap(b64(PEM), 64)), "private-key", "\r\n".join(textwrap.wrap(b64(PEM), 64))),
    ('"' + "\\n".join(textwrap.wrap(b64(PEM), 64)) + '"', "private-key", "\\n".join(textwrap.wrap(b64(PEM), 64))),
    (f"blob {b64('export GITHUB_TOKEN=' + gh('ghp', 701))} end", "github-token",
     b64("export GITHUB_TOKEN=" + gh("ghp", 701))),
    (f"x {b64(aws(702))} y", "aws-access-key", b64(aws(702))),
    (f"Authorization: Basic {b64('api:' + sk(703))}", "openai-api-key", b64("api:" + sk(703))),
    (f"cfg: {urlsafe(json.dumps({PASSWORD: rnd(ALNUM, 20, 704)}))}", "assignment",
     urlsafe(json.dumps({PASSWORD: rnd(ALNUM, 20, 704)}))),
    # percent encoding: the finding covers the encoded characters it came from
    (f"?next=%2Fcb%3Ftoken%3D{gh('ghp', 705)}%26a%3D1", "github-token", gh("ghp", 705)),
    (f"d={quote(PEM.strip(), safe='')}&x=1", "private-key", quote(PEM.strip(), safe="")),
    (f"q={quote(json.dumps({PASSWORD: rnd(ALNUM, 20, 706)}), safe='')}", "assignment",
     quote(rnd(ALNUM, 20, 706), safe="")),
    (f"jwt%3D{jwt(707)}", "jwt", jwt(707)),
]


@pytest.mark.parametrize(("text", "kind", "span"), ENCODED, ids=range(len(ENCODED)))
def test_one_layer_is_looked_through(text: str, kind: str, span: str) -> None:
    found = scan(text)
    assert [f.kind for f in found] == [kind]
    assert text[found[0].start : found[0].end] == span
    out, _ = redact(text)
    assert out == text.replace(span, f"[REDACTED:{kind}]", 1)
    assert scan(out) == []


def test_line_is_the_line_of_the_encoded_block() -> None:
    text = "a\nb\n  key: " + b64(PEM) + "\nc"
    assert [(f.kind, f.line) for f in scan(text)] == [("private-key", 3)]


def test_only_one_layer() -> None:
    assert scan(b64(b64(PEM))) == []  # a documented limit: decoded text is not decoded again


@pytest.mark.parametrize("above", ["MyVeryLongIdentifierName123", rnd(HEX, 40, 708)])
def test_a_name_line_above_the_block_does_not_hide_it(above: str) -> None:
    for block in (b64(PEM), "\n".join(textwrap.wrap(b64(PEM), 64))):
        text = f"{above}\n{block}"
        found = scan(text)
        assert [(f.kind, f.line) for f in found] == [("private-key", 2)]
        assert text[found[0].start : found[0].end] == block


def test_wrapped_block_does_not_swallow_neighbours() -> None:
    lines = textwrap.wrap(b64(PEM), 64)
    text = "some_identifier_name_here_x\n" + "\n".join(lines) + "\nthanks for looking"
    out, found = redact(text)
    assert [f.kind for f in found] == ["private-key"]
    assert out.endswith("\nthanks for looking")


PROSE = "The build is green again. I rebased on main and reran the flaky test; please review the diff when you can."
NOT_SECRETS = [
    *(rnd(HEX, 40, 710 + i) for i in range(5)),
    *(rnd(HEX, 64, 720 + i) for i in range(5)),
    " ".join(str(uuid.UUID(int=random.Random(730 + i).getrandbits(128), version=4)) for i in range(10)),
    b64(PROSE),
    "\n".join(textwrap.wrap(b64(PROSE * 10), 76)),
    urlsafe(PROSE),
    b64(json.dumps({"name": "web", "replicas": 3, "image": "nginx:1.27", "token_url": "https://x/token"})),
    b64(f"{PASSWORD} = changeme\ntoken: <your-token>\nAPI_KEY=${{API_KEY}}\n"),
    b64("the token expired, please log in again; password: see vault"),
    "data:image/png;base64," + base64.b64encode(random.Random(740).randbytes(6000)).decode(),
    '"integrity": "sha512-' + base64.b64encode(random.Random(741).randbytes(64)).decode() + '"',
    "\n".join(base64.b64encode(random.Random(742 + i).randbytes(48)).decode() for i in range(50)),
    "some_long_function_name_here = another_quite_long_identifier_name(x)",
    "MyVeryLongClassNameForTesting123 extends AbstractBaseControllerFactory",
    "src/agentmsg/text/secrets/test_secrets_decoded.py",
    "https://example.com/search?q=hello%20world%21&lang=en%2Dus and 100% sure",
    "https://www.google.com/url?q=https%3A%2F%2Fexample.com%2Fpath%3Fa%3D1%26b%3D2&sa=D",
    f'{PASSWORD}: "%DB_PASSWORD%"',
    "printf('%deg %s %d%%', x)",
    "%E2%9C%93 done, caf%C3%A9, 50%25 off",
    quote("password: see vault, the token expired"),
    "eyJhbGciOiJub25lIn0 is only a header",
    "rotate SK" + rnd(HEX, 32, 743) + " and AC" + rnd(HEX, 32, 744) + " tomorrow",
    "s.getElementsByTagName('div'); this.s.AbstractFactoryBean1; s.ThisIsAnIdentifierName",
    "dapi is a name; hvs.example; the secret_threshold_for_the_model_is_set_here",
    "r8_model and xai-grok and pul-request and gsk_something",
]


@pytest.mark.parametrize("text", NOT_SECRETS, ids=range(len(NOT_SECRETS)))
def test_harmless_encoded_looking_text_is_not_flagged(text: str) -> None:
    assert scan(text) == []


def test_decoded_text_stays_within_the_budget() -> None:
    one = b64("x" * 3000)  # text, so it is decoded
    sources = secrets._encoded((one + "\n\n") * 60)  # 180 000 decoded characters on offer
    assert sum(len(s[2]) for s in sources) <= secrets._DECODE_BUDGET
    assert len(sources) < 60


def test_binary_and_hex_runs_are_not_decoded() -> None:
    text = " ".join([rnd(HEX, 40, 750), str(uuid.UUID(int=1)), base64.b64encode(bytes(range(256))).decode()])
    assert secrets._encoded(text) == []


ADVERSARIAL = [
    "%41 " * 16384,
    "%41" * 21845,
    "a" * 65000 + " %41",
    "%zz" * 21845,
    "%" * 65536,
    "QUFB" * 16384,
    ("QUFBQUFBQUFBQUFBQUFBQUFBQUFB " * 2400)[:65536],
    ("QUFBQUFBQUFBQUFBQUFBQUFBQUFB\n" * 2400)[:65536],
    ("TWFu%20" * 9400)[:65536],
    ("A" * 23 + " ") * 2700,
    ("a" * 32 + "B") * 1980,
    "\\n" * 32768,
    (b64(PEM) + "\n") * 30,
    (quote(PEM, safe="") + " ") * 25,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_adversarial_encodings_complete(text: str) -> None:
    started = time.perf_counter()
    out, found = redact(text)
    assert scan(out) == []
    assert isinstance(found, list)
    assert time.perf_counter() - started < 30  # linear work takes well under a second

