"""Credential detector: `agentmsg send` refuses bodies that carry a secret.

Why: a message body is copied onto disk and into other agents' model
context, so a pasted token would leak twice. Detection is table-driven
(`RULES`), pure and standard-library only, because hooks import it from a
plain ``python3``; every pattern is linear-time on 64 KiB bodies.

API: ``scan(text) -> list[Finding]`` (sorted, non-overlapping) and
``redact(text) -> (text, findings)`` (each finding becomes
``[REDACTED:<kind>]``; for assignments and URLs only the value).

Rules, highest precedence first (on overlap the earlier kind wins and
absorbs the overlapping span, so findings never overlap):

=================  ====================================================
kind               matches
=================  ====================================================
private-key        PEM/PGP/SSH2 ``BEGIN ... PRIVATE KEY`` block with
                   base64 key material (RSA, EC, DSA, OPENSSH, ...)
jwt                ``eyJ...`` three base64url segments whose header
                   decodes to a JSON object with ``"alg"``
slack-token        Slack webhook URL ``https://hooks.slack.com/...``
anthropic-api-key  ``sk-ant-...``
openai-api-key     ``sk-...`` / ``sk-proj-...`` (never ``sk-ant-``)
github-token       ``ghp_ gho_ ghu_ ghs_ ghr_`` + 36, ``github_pat_...``
gitlab-token       ``glpat-...``
slack-token        ``xoxb- xoxp- xoxa- xoxr- xoxs- xoxe- xoxo-`` tokens
gcp-api-key        ``AIza`` + 35
aws-access-key     ``AKIA`` / ``ASIA`` + 16
url-credentials    password in ``scheme://user:password@host``
assignment         ``password=`` / ``token:`` / ``"api_key": "..."``
                   style assignment of a high-entropy value
=================  ====================================================

See docs/SECRETS.md for example shapes and false-positive guards.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["RULES", "Finding", "Rule", "redact", "scan"]


@dataclass(frozen=True)
class Rule:
    """One detector: `validator` vets a regex match; `groups` pick the span."""

    kind: str
    pattern: re.Pattern[str]
    validator: Callable[[re.Match[str]], bool] | None = None
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class Finding:
    """A secret at text[start:end]; `line` is 1-based."""

    kind: str
    line: int
    start: int
    end: int


# Token boundaries. "]" before and "[" after count as token characters so
# that a "[REDACTED:...]" marker never frees a neighbour to match on rescan.
_BEFORE = r"(?<![A-Za-z0-9_\]-])"
_AFTER = r"(?![A-Za-z0-9_\[-])"
# AWS/GCP shapes also appear by chance inside base64 blobs; "+" and "/"
# neighbours mean "inside base64", not "a key".
_B64_BEFORE = r"(?<![A-Za-z0-9_+/\]-])"
_B64_AFTER = r"(?![A-Za-z0-9_+/\[-])"
# Token characters with "-", but never "----": a key cannot swallow the
# dashes of an adjacent "-----BEGIN ... PRIVATE KEY-----".
_RUN = r"(?:[A-Za-z0-9_]|-(?!---))"
_SLACK_RUN = r"(?:[A-Za-z0-9]|-(?!---))"

_PEM_HEAD = r"-{4,5} ?BEGIN (?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)? ?-{4,5}"
_PEM_TAIL = r"-{4,5} ?END (?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)? ?-{4,5}"
# Body: base64, PEM headers (Proc-Type: 4,ENCRYPTED), JSON "\n" escapes;
# stops at the next "----" so an unterminated block cannot run away.
_PEM_BODY = r"(?P<body>(?:[A-Za-z0-9+/=\s:,._\\]+|-(?!---))*)"


def _atomic(name: str, body: str) -> str:
    """Named group that never backtracks (lookarounds are atomic in `re`).

    Keeps capped runs linear: a 64 KiB run fails once instead of retrying
    every shorter length. (Atomic groups need 3.11; hooks may run 3.10.)
    """
    return f"(?=(?P<{name}>{body}))(?P={name})"


_ASSIGN_KEY = (
    r"(?:pass(?:word|wd|phrase)|secret|token|api[_-]?key|access[_-]?key"
    r"|auth[_-]?key|private[_-]?key|authorization|credentials?)"
)
# A plain class keeps the capped scan fast. A value that runs into an
# adjacent "-----BEGIN" is rejected (dash filler) and then found by _settle.
_BARE = r"""(?:[^\s"'`,;()\[\]{}<>&|\\]|&(?![A-Za-z_][A-Za-z0-9_]*=))"""  # "&" ends a value only before "key="
_SCHEME = r"(?:(?:bearer|basic|token)[ \t]+)?"
# A "]" after the key only closes a quoted subscript (env["TOKEN"]); a bare
# "token]" is the tail of a [REDACTED:github-token] marker, not a key.
_ASSIGN = (
    _ASSIGN_KEY + r"[a-z0-9_-]{0,32}(?:[\"']\]?)?[ \t]{0,16}(?:=>|[:=]=?)[ \t]{0,16}"
    r'(?:"' + _SCHEME + _atomic("dq", r'[^"\r\n]{1,512}') + '"'
    r"|'" + _SCHEME + _atomic("sq", r"[^'\r\n]{1,512}") + "'"
    r"|" + _SCHEME + _atomic("bare", _BARE + "{1,512}") + f"(?!{_BARE}))"
)
_URL_CREDS = (
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,30}://"
    + _atomic("user", r"[^\s/?#@:\"'<>\[\]]{0,128}")
    + ":"
    + _atomic("pw", r"[^\s/?#@\"'<>]{1,256}")
    + "@"
)

# Filler inside a prefixed token ("AKIAXXXXXXXX...", docs' EXAMPLE keys).
# Case-sensitive and short so real random tokens almost never trip it.
_DUMMY = re.compile(r"([A-Za-z0-9])\1{5}|EXAMPLE|example|XXXX|xxxx|your|dummy|fake|placeholder|REDACTED")
# Placeholder values in assignments and URLs: <x>, [x], {x}, $VAR, ${VAR},
# $(cmd), %VAR%, %s, runs like xxxxx/*****, and tell-tale words.
_PLACEHOLDER = re.compile(
    r"^(?:<.*>|\[.*\]|\{.*\}|\$\{?\w+\}?|\$\(.*\)|%\w+%|%\(?\w*\)?s)$"
    r"|(.)\1{4}|\.\.\.|changeme|change[_-]me|example|placeholder|your|redacted"
    r"|dummy|fake|sample|insert|replace[_-]?me|todo",
    re.IGNORECASE,
)
# Identifiers, dotted paths and word lists (settings.SECRET_KEY,
# AutoTokenizer, app-tls-cert) are references to secrets, not secrets.
_WORDY = re.compile(
    r"^[./~]*(?:[A-Za-z]+(?:[-_./:][A-Za-z]+)+|[a-z]+|[A-Z]+"
    r"|[A-Z]?[a-z]+(?:[A-Z][a-z]+)+)/?$"
)
_PATHLIKE = re.compile(r"^(?:~|\.{1,2})?/|^[a-z]:\\|/.*\.[a-z0-9]{1,5}$|^https?://", re.IGNORECASE)
_B64_RUN = re.compile(r"[A-Za-z0-9+/]{32}")
_DEV_PASSWORDS = frozenset({"password", "passwd", "secret", "changeme", "postgres", "root", "admin", "guest", "pass"})


def _entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


def _random_body(m: re.Match[str]) -> bool:
    """Prefixed tokens: reject filler such as AKIA + "X" * 16."""
    body = m.group("body")
    return _DUMMY.search(body) is None and _entropy(body) >= 2.5


def _api_key(m: re.Match[str]) -> bool:
    """sk- keys: need digits, letters and one long random run ("sk-learn-x" is not)."""
    body = m.group("body")
    longest = max(len(part) for part in body.replace("_", "-").split("-"))
    has_digit = any(c.isdigit() for c in body)
    return longest >= 16 and has_digit and any(c.isalpha() for c in body) and _random_body(m)


def _pem(m: re.Match[str]) -> bool:
    """A header alone (in prose or docs) carries no key material."""
    return _B64_RUN.search(m.group("body")) is not None


def _jwt(m: re.Match[str]) -> bool:
    """The header must decode to a JSON object naming an algorithm."""
    import binascii
    import json

    seg = m.group("header")
    if len(seg) > 2048:
        return False
    padded = seg.replace("-", "+").replace("_", "/") + "=" * (-len(seg) % 4)
    try:
        header = json.loads(binascii.a2b_base64(padded))
    except (ValueError, binascii.Error, RecursionError):
        return False
    return isinstance(header, dict) and "alg" in header


def _url_password(m: re.Match[str]) -> bool:
    """Skip dev defaults (postgres:postgres@) and placeholders."""
    pw = m.group("pw")
    if len(pw) < 6 or pw == m.group("user") or pw.lower() in _DEV_PASSWORDS:
        return False
    return _PLACEHOLDER.search(pw) is None


def _assigned_value(m: re.Match[str]) -> str:
    return next(v for v in (m.group("dq"), m.group("sq"), m.group("bare")) if v is not None)


def _assignment(m: re.Match[str]) -> bool:
    """High-entropy, non-placeholder, non-reference value."""
    value = _assigned_value(m)
    if len(value) < 12 or any(c.isspace() for c in value) or _entropy(value) < 3.5:
        return False
    if _PLACEHOLDER.search(value) or _WORDY.match(value) or _PATHLIKE.search(value):
        return False
    return not m.string.startswith("(", m.end())  # token = make_token(...)


def _rule(
    kind: str,
    pattern: str,
    validator: Callable[[re.Match[str]], bool] | None = None,
    groups: tuple[str, ...] = (),
    flags: int = 0,
) -> Rule:
    return Rule(kind, re.compile(pattern, flags), validator, groups)


# Order is precedence: a rule whose matches can contain another's comes first.
RULES: tuple[Rule, ...] = (
    _rule("private-key", _PEM_HEAD + _PEM_BODY + f"(?:{_PEM_TAIL})?", _pem),
    _rule(
        "jwt",
        r"(?<![A-Za-z0-9_.\]-])(?P<header>eyJ[A-Za-z0-9_-]{8,})\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*",
        _jwt,
    ),
    _rule(
        "slack-token",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/(?P<body>[A-Za-z0-9_/-]{16,})",
        _random_body,
    ),
    _rule("anthropic-api-key", _BEFORE + r"sk-ant-(?P<body>" + _RUN + "{20,})", _api_key),
    _rule("openai-api-key", _BEFORE + r"sk-(?!ant-)(?P<body>" + _RUN + "{20,})", _api_key),
    _rule("github-token", _BEFORE + r"github_pat_(?P<body>[A-Za-z0-9_]{36,251})" + _AFTER, _random_body),
    _rule("github-token", _BEFORE + r"gh[pousr]_(?P<body>[A-Za-z0-9]{36,251})" + _AFTER, _random_body),
    _rule("gitlab-token", _BEFORE + r"glpat-(?P<body>" + _RUN + "{20,})", _random_body),
    _rule("slack-token", _BEFORE + r"xox[abeoprs]-(?P<body>[0-9]{1,20}-" + _SLACK_RUN + "{8,})", _random_body),
    _rule("gcp-api-key", _B64_BEFORE + r"AIza(?P<body>[0-9A-Za-z_-]{35})" + _B64_AFTER, _random_body),
    _rule("aws-access-key", _B64_BEFORE + r"(?:AKIA|ASIA)(?P<body>[A-Z0-9]{16})" + _B64_AFTER, _random_body),
    _rule("url-credentials", _URL_CREDS, _url_password, ("pw",)),
    _rule("assignment", _ASSIGN, _assignment, ("dq", "sq", "bare"), re.IGNORECASE),
)


def _span(m: re.Match[str], groups: tuple[str, ...]) -> tuple[int, int]:
    for name in groups:
        if m.group(name) is not None:
            return m.span(name)
    return m.span()


def _candidates(rule: Rule, text: str) -> Iterator[tuple[int, int]]:
    """Validated spans; a rejected match retries one character later."""
    pos = 0
    while (m := rule.pattern.search(text, pos)) is not None:
        if rule.validator is None or rule.validator(m):
            yield _span(m, rule.groups)
            pos = m.end()
        else:
            pos = m.start() + 1


_Span = tuple[int, int, int, str]  # start, end, rank (lower wins), kind


def _place(spans: list[_Span], start: int, end: int, rank: int, kind: str) -> None:
    """Insert keeping spans sorted and disjoint; overlaps merge, best rank names them."""
    i = bisect_left(spans, (start,))
    if i and spans[i - 1][1] > start:
        i -= 1
    j = i
    while j < len(spans) and spans[j][0] < end:
        j += 1
    merged = [*spans[i:j], (start, end, rank, kind)]
    best = min(merged, key=lambda s: s[2])
    lo, hi = min(s[0] for s in merged), max(s[1] for s in merged)
    spans[i:j] = [(lo, hi, best[2], best[3])]


def _spans(text: str) -> list[_Span]:
    spans: list[_Span] = []
    for rank, rule in enumerate(RULES):
        for start, end in _candidates(rule, text):
            _place(spans, start, end, rank, rule.kind)
    return spans


def _apply(text: str, spans: list[tuple[int, int, str]]) -> str:
    parts, pos = [], 0
    for start, end, kind in spans:
        parts += (text[pos:start], f"[REDACTED:{kind}]")
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def _to_original(spans: list[_Span], pos: int, is_end: bool) -> int:
    """Map a position in the redacted text back; inside a marker means its whole span."""
    shift = 0
    for start, end, _rank, kind in spans:
        marker, width = start - shift, len(kind) + 11  # "[REDACTED:" + kind + "]"
        if pos <= marker:
            break
        if pos < marker + width:
            return end if is_end else start
        shift += end - start - width
    return pos + shift


def _settle(text: str, spans: list[_Span]) -> list[_Span]:
    """Rescan the redacted text until it is clean.

    A value rejected only because of the secret beside it (say a password
    whose tail ran into a key's "-----") is a finding once that secret is a
    marker; reporting it here means redact() leaves nothing to find.
    """
    for _ in range(8):
        extra = _spans(_apply(text, [(s, e, k) for s, e, _r, k in spans])) if spans else []
        if not extra:
            break
        mapped = [(_to_original(spans, s, False), _to_original(spans, e, True), r, k) for s, e, r, k in extra]
        for start, end, rank, kind in mapped:
            _place(spans, start, end, rank, kind)
    return spans


def scan(text: str) -> list[Finding]:
    """Every secret in `text`, sorted by position and non-overlapping."""
    findings, line, pos = [], 1, 0
    for start, end, _rank, kind in _settle(text, _spans(text)):
        line += text.count("\n", pos, start)
        pos = start
        findings.append(Finding(kind, line, start, end))
    return findings


def redact(text: str) -> tuple[str, list[Finding]]:
    """Replace each finding with ``[REDACTED:<kind>]`` (assignments: value only)."""
    findings = scan(text)
    return _apply(text, [(f.start, f.end, f.kind) for f in findings]), findings
