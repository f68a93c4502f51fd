"""The literal gates of the secret and injection patterns are sound (agentmsg/text/gate.py).

A gate lets a pattern go uncompiled when the text lacks a literal every
match holds; a wrong gate would be a missed secret or flag. So: every match
the bare pattern finds, on the test corpora, the docs and random text, holds
its rule's gate; gated and ungated scans return exactly the same; and the
case-folding table covers every character re.IGNORECASE matches to ASCII.
"""

from __future__ import annotations

import re
import string
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmsg.text import injection, secrets
from agentmsg.text.gate import Gated, fold

REPO = Path(__file__).resolve().parents[2]
CORPUS_MODULES = ("tests.text.test_secrets", "tests.text.test_secrets_context", "tests.text.test_secrets_decoded",
                  "tests.docs.test_secrets_docs", "tests.adversarial.test_secret_formats",
                  "tests.text.test_flags", "tests.adversarial.test_trust_edges", "tests.adversarial.cases")
RULES: list[tuple[str, Gated]] = [(r.kind, r.gated) for r in secrets.RULES] + [
    (r.name, r.gated) for r in injection.RULES
]


def _strings(value: object, depth: int = 0) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes):
        yield value.decode("utf-8", "replace")
    elif isinstance(value, (list, tuple, set, frozenset)) and depth < 4:
        for item in value:
            yield from _strings(item, depth + 1)
    elif isinstance(value, dict) and depth < 4:
        for key, item in value.items():
            yield from _strings(key, depth + 1)
            yield from _strings(item, depth + 1)


def _corpus() -> list[str]:
    """Every string constant of the secret, flag and adversarial tests, the docs, and these sources."""
    import importlib

    texts: set[str] = set()
    for name in CORPUS_MODULES:
        module = importlib.import_module(name)
        for value in vars(module).values():
            texts.update(_strings(value))
    for path in [*REPO.glob("docs/*.md"), REPO / "README.md", REPO / "agentmsg/text/secrets.py",
                 REPO / "agentmsg/text/injection.py"]:
        texts.add(path.read_text(encoding="utf-8"))
    return sorted(texts)


CORPUS = _corpus()


def _views(text: str) -> list[str]:
    return [text, injection._folded(text)]


def _matches(pattern: re.Pattern[str], text: str, limit: int = 200) -> Iterator[re.Match[str]]:
    """Matches starting at every position a scan can try (as `secrets._candidates` retries)."""
    pos = 0
    for _ in range(limit):
        m = pattern.search(text, pos)
        if m is None:
            return
        yield m
        pos = m.start() + 1


def _assert_gates_hold(text: str) -> None:
    for kind, gated in RULES:
        for view in _views(text):
            for m in _matches(gated.pattern, view):
                found = m.group(0)
                assert gated.may_match(found, fold(found)), (kind, found, gated.gate)


@contextmanager
def _ungated() -> Iterator[None]:
    """Every rule compiled and run on every text: the scanners as they were before gates."""
    saved = Gated.may_match
    Gated.may_match = lambda self, text, folded: True  # type: ignore[method-assign]
    try:
        yield
    finally:
        Gated.may_match = saved  # type: ignore[method-assign]


def _results(text: str) -> tuple[object, ...]:
    return secrets.scan(text), secrets.redact(text), injection.detect(text)


def _assert_same_as_ungated(text: str) -> None:
    gated = _results(text)
    with _ungated():
        assert _results(text) == gated


def test_corpus_is_not_trivial() -> None:
    assert len(CORPUS) > 500
    hits = sum(bool(secrets.scan(t)) for t in CORPUS)
    flagged = sum(bool(injection.detect(t)) for t in CORPUS)
    assert hits > 100 and flagged > 100


def test_every_match_on_the_corpus_holds_its_gate() -> None:
    for text in CORPUS:
        _assert_gates_hold(text)


def test_gated_scans_equal_ungated_on_the_corpus() -> None:
    for text in CORPUS:
        _assert_same_as_ungated(text)


def test_fold_covers_every_character_ignorecase_matches_to_ascii() -> None:
    any_letter = re.compile("[a-z]", re.IGNORECASE)
    odd = [chr(c) for c in range(128, sys.maxunicode + 1) if any_letter.fullmatch(chr(c))]
    assert odd  # the Kelvin sign, the long s, dotted and dotless i
    for ch in odd:
        letters = [x for x in string.ascii_lowercase if re.fullmatch(x, ch, re.IGNORECASE)]
        assert letters == [fold(ch)], (hex(ord(ch)), letters, fold(ch))
    for text in ("İgnore", "ıgnore", "paſſword", "\u212aey"):
        assert fold(text).isascii() and len(fold(text)) == len(text)


def test_hidden_text_matches_nothing_ascii() -> None:
    (hidden,) = [r.gated for r in injection.RULES if r.name == "hidden-text"]
    assert hidden.nonascii
    assert not any(hidden.pattern.search(chr(c)) for c in range(128))


def test_gates_skip_compiling_on_plain_prose() -> None:
    """The point of the gates: a plain message compiles (almost) nothing."""
    text = "a benchmark message\nThe build is green; please review the diff when you can."
    folded = fold(text)
    live = [kind for kind, gated in RULES if gated.may_match(text, folded)]
    assert live == []


def test_gates_let_each_rule_through_on_its_own_example() -> None:
    """Gates are not so tight that nothing gets through: each kind and flag still fires."""
    kinds = {f.kind for t in CORPUS for f in secrets.scan(t)}
    assert kinds == {r.kind for r in secrets.RULES}
    names = {n for t in CORPUS for n in injection.detect(t)}
    assert names == {r.name for r in injection.RULES}


# Random text: literals the gates and patterns use, in random case, between random characters,
# so that matches (and near misses) actually occur.
_PIECES = sorted(
    {lit for _kind, g in RULES for alt in g.gate for clause in alt for lit in clause}
    | {"BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "eyJhbGciOiJIUzI1NiJ9", "https://",
       "user:", "p4ssW0rd9x", "=", ": ", "\"", "'", "\n", "  ", "\\n", "/bot", "1234567890", "AAxK9mP2qL7vR3tZ8",
       "Xk9mP2qL7vR3tZ8wY4nB6cD1", "the user has", "you are now", "ignore all previous", "<system>", "[INST]",
       "İ", "ı", "ſ", "\u212a", "\u200b", "\ufeff", "ｉｇｎｏｒｅ", "⟦", "Ａ", "ß", "@", "machine example.com login",
       "--password ", "-u admin:", "<password>", "</password>", "TOKEN=", "api_key: "}
)


def _recase(piece: str, flips: list[bool]) -> str:
    return "".join(c.swapcase() if flips[i % len(flips)] else c for i, c in enumerate(piece)) if flips else piece


_piece = st.builds(_recase, st.sampled_from(_PIECES), st.lists(st.booleans(), max_size=4))
_noise = st.text(alphabet=string.ascii_letters + string.digits + " _-./:=+@<>[]#\n" + "İıſ\u212a\u200b⟦ß", max_size=6)
_random_text = st.lists(st.one_of(_piece, _noise), max_size=25).map("".join)


@settings(max_examples=600, deadline=None)
@given(_random_text)
def test_gates_hold_and_agree_on_random_text(text: str) -> None:
    _assert_gates_hold(text)
    _assert_same_as_ungated(text)


@pytest.mark.parametrize("text", ["", "x", "no literals here at all"])
def test_gated_scans_equal_ungated_on_trivial_text(text: str) -> None:
    _assert_same_as_ungated(text)
