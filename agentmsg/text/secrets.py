"""Credential detector: `agentmsg send` refuses bodies that carry a secret.

Why: a message body is copied onto disk and into other agents' model
context, so a pasted token would leak twice. Detection is table-driven
(`RULES`), pure and standard-library only, because hooks import it from a
plain ``python3``; every pattern is linear-time on 64 KiB bodies.

API: ``scan(text) -> list[Finding]`` (sorted, non-overlapping) and
``redact(text) -> (text, findings)`` (each finding becomes
``[REDACTED:<kind>]``; for assignments, URLs, connection strings and
``.netrc`` entries only the value).

`RULES` is the table, highest precedence first: on overlap the earlier
kind wins and absorbs the overlapping span, so findings never overlap.
Vendor rules (a fixed prefix or URL) come first; three context rules close
the table: `url-credentials` (``scheme://user:password@``),
`netrc-password` and `assignment` (a value bound to a credential-named
key). A vendor rule that declines a match (filler, low entropy) does not
hide it from the context rules: each rule scans the whole text.

One placeholder rule (`is_placeholder`) exempts values in the context
rules; it only ever applies to the *whole* value. docs/SECRETS.md lists
every kind with an example shape, the placeholder rule and the limits.

One layer of base64 or percent encoding is looked through (issue 29): the
decoded text is scanned with the same rules and a finding covers its
encoded source (see "one layer of encoding" below for the bounds).
"""

from __future__ import annotations

import binascii
import math
import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterator

from agentmsg.domain.values import Value
from agentmsg.text.gate import Gated, Lazy, fold

__all__ = ["RULES", "Finding", "Rule", "is_placeholder", "redact", "scan"]


class Rule(Value):
    """One detector: `validator` vets a regex match; `groups` pick the span.

    `gated` holds the pattern, compiled only for a text that holds its
    literal gate (`gate.Gated`), so most sends compile few of them.
    A slotted `Value`, not a dataclass: importing and applying
    `dataclasses` cost about 2 ms of every send's start-up.
    """

    __slots__ = ("gated", "groups", "kind", "validator")
    kind: str
    gated: Gated
    validator: Callable[[re.Match[str]], bool] | None
    groups: tuple[str, ...]

    def __init__(
        self,
        kind: str,
        gated: Gated,
        validator: Callable[[re.Match[str]], bool] | None = None,
        groups: tuple[str, ...] = (),
    ) -> None:
        self.kind, self.gated, self.validator, self.groups = kind, gated, validator, groups

    @property
    def pattern(self) -> re.Pattern[str]:
        return self.gated.pattern


class Finding(Value):
    """A secret at text[start:end]; `line` is 1-based."""

    __slots__ = ("end", "kind", "line", "start")
    kind: str
    line: int
    start: int
    end: int

    def __init__(self, kind: str, line: int, start: int, end: int) -> None:
        self.kind, self.line, self.start, self.end = kind, line, start, end

    def __repr__(self) -> str:
        return f"Finding(kind={self.kind!r}, line={self.line!r}, start={self.start!r}, end={self.end!r})"


# Token boundaries. "]" before and "[" after count as token characters so
# that a "[REDACTED:...]" marker never frees a neighbour to match on rescan.
_TOKEN_CHARS = r"A-Za-z0-9_\]-"
_AFTER = r"(?![A-Za-z0-9_\[-])"
# Shapes that also appear by chance inside base64 blobs; "+" and "/"
# neighbours mean "inside base64", not "a key".
_B64_CHARS = r"A-Za-z0-9_+/\]-"
_B64_AFTER = r"(?![A-Za-z0-9_+/\[-])"


def _lead(prefix: str, width: int, before: str = _TOKEN_CHARS) -> str:
    """`prefix` (`width` characters) not preceded by a character in `before`.

    The check comes after the prefix so that the pattern starts with a
    literal, which `re` finds with a fast scan instead of trying a
    lookbehind at every position.
    """
    return prefix + rf"(?<![{before}][\s\S]{{{width}}})"


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


# ---- the placeholder rule ---------------------------------------------------------------------------

# Values wrapped as a template, variable or marker: <x>, [x], {x}, {{ x }},
# ${X}, $(cmd), `cmd`, %X%, %s, %(x)s, __X__, @X@, #{x}; and bare $X.
_WRAPPED = Lazy(
    r"<.*>|\[.*\]|\{.*\}|\$\{.*\}|\$\(.*\)|`.*`|%\w+%|%\(?\w*\)?[sdr]|__\w+__|@\w+@|#\{.*\}"
    r"|\$[A-Za-z_][A-Za-z0-9_]*(?:[.:][A-Za-z_][A-Za-z0-9_]*)*",
    re.DOTALL,
)
# Words that make a value a stand-in when the whole value is made of them.
_PLACEHOLDER_WORDS = frozenset(
    """changeme change me changeit it password passwd pass pwd secret secrets token tokens key keys api apikey
    access auth private client example examples sample placeholder redacted dummy test testing fake mock
    none null nil empty undefined todo tbd fixme your my the a an here goes insert enter paste put replace add
    fill value string foo bar baz qux foobar xyz abc default hidden masked notreal not real demo stub
    something some goes own actual""".split()
)
# Local-development defaults that carry no secrecy.
_DEV_PASSWORDS = frozenset({"postgres", "root", "admin", "guest", "mysql", "letmein", "qwerty", "hunter2"})
_ALNUM_RUN = Lazy(r"[A-Za-z0-9]{8,}")
_MASK = frozenset(".*•…")
_SEPARATORS = Lazy(r"[-_.:/= \t]+")
_WORD_PART = Lazy(r"([a-z]+)([0-9]{0,3})|([0-9]{1,4})")
# Known token prefixes: "ghp_" + filler is as much a stand-in as filler.
_TOKEN_PREFIX = Lazy(
    r"(?:sk-(?:ant-|proj-)?|[sr]k_(?:live|test)_|whsec_|gh[pousr]_|github_pat_|glpat-|xox[a-z]-|xapp-"
    r"|AKIA|ASIA|AIza|npm_|pypi-|hf_|SG\.|ya29\.|GOCSPX-|do[opr]_v1_|shp(?:at|ca|pa|ss)_"
    r"|gl(?:ptt|dt|rt|cbt|oas|soat|ft|imt|agent)-|dapi(?=[0-9a-f])|hv[sbr]\.|ATATT3|glsa_|glc_|sntry[su]_|PMAK-"
    r"|dp\.(?:pt|st|ct|sa)\.|pscale_(?:tkn|pw|oauth)_|lin_api_|sbp_|sb_secret_|dckr_(?:pat|oat)_|rubygems_|NRAK-"
    r"|tskey-|lsv2_(?:pt|sk)_|gsk_|pplx-|xkeysib-|dt0c01\.|ntn_|sq0(?:atp|csp)-|AGE-SECRET-KEY-1)"
)
# Filler inside a prefixed token ("AKIAXXXXXXXX...", docs' EXAMPLE keys).
# Case-sensitive and short so real random tokens almost never trip it.
_DUMMY = Lazy(r"([A-Za-z0-9])\1{5}|EXAMPLE|example|XXXX|xxxx|your|dummy|fake|placeholder|REDACTED")
# The two values AWS publishes in its documentation, split so that no
# scanner reads this file as holding them.
_PUBLISHED_EXAMPLES = frozenset({"AKIA" + "IOSFODNN7" + "EXAMPLE", "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"})


def _keyish(text: str) -> bool:
    """Holds a run that looks like key material: 8+ letters and digits, two or more of each."""
    for run in _ALNUM_RUN.findall(text):
        digits = sum(c.isdigit() for c in run)
        if digits >= 2 and len(run) - digits >= 2:
            return True
    return False


def _filler(body: str) -> bool:
    """At least a quarter of a token body is filler (XXXX, EXAMPLE, 000000, your...)."""
    return sum(m.end() - m.start() for m in _DUMMY.finditer(body)) * 4 >= len(body)


def _placeholder_words(value: str) -> bool:
    parts = [p for p in _SEPARATORS.split(value.lower()) if p]
    if not parts:
        return False
    for part in parts:
        m = _WORD_PART.fullmatch(part)
        if m is None:
            return False
        word = m.group(1)
        if word is not None and word not in _PLACEHOLDER_WORDS and len(set(word)) > 1:
            return False
    return True


def is_placeholder(value: str) -> bool:
    """True when the WHOLE value is a stand-in, not a credential (docs/SECRETS.md, "Placeholders").

    1. a template, variable or marker: ``<...>``, ``[...]`` (so
       ``[REDACTED:kind]``), ``{...}``/``{{ ... }}``, ``${...}``, ``$VAR``,
       ``$(cmd)``, backticks, ``%VAR%``, ``%s``/``%(name)s``, ``__VAR__``,
       ``@VAR@``, ``#{...}`` -- unless it holds a key-like run (8+ letters
       and digits, two or more of each), so ``<Xk9mP2qL...>`` is no cover;
    2. one character repeated, separators aside: ``xxxx``, ``****``, ``0000``,
       ``XXXX-XXXX``;
    3. masked or elided: contains ``...``, ``…`` or ``***`` and at most 8
       other characters (``sk-...``, ``****abcd``);
    4. made only of placeholder words (`_PLACEHOLDER_WORDS`: changeme,
       password, secret, token, example, placeholder, redacted, dummy, test,
       none, null, empty, your, here, ...), each optionally followed by up to
       three digits, and short numbers (``your-token-here``, ``test123``);
    5. a local-development default (postgres, root, admin, guest, ...);
    6. a known token prefix followed by a placeholder or by filler
       (``ghp_XXXX...``, ``sk-your-key``), or a value AWS publishes in its docs.
    """
    v = value.strip()
    if not v:
        return True
    if _WRAPPED.fullmatch(v):
        return not _keyish(v)
    squeezed = _SEPARATORS.sub("", v.lower())
    if len(set(squeezed)) <= 1:
        return True
    if ("..." in v or "…" in v or "***" in v) and sum(c not in _MASK for c in v) <= 8:
        return True
    if _placeholder_words(v) or v.lower() in _DEV_PASSWORDS or v in _PUBLISHED_EXAMPLES:
        return True
    prefix = _TOKEN_PREFIX.match(v)
    if prefix is not None and prefix.end() < len(v):
        body = v[prefix.end() :]
        return is_placeholder(body) or _filler(body)
    return False


# ---- what a credential looks like in context -------------------------------------------------------

# Words of a key name: DB_PASSWORD, clientSecret, x-api-key, APIKey.
_KEY_PARTS = Lazy(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# A key word that names a credential by itself (dbpassword, csrftoken, apikey).
_CRED_WORD = Lazy(
    r"[a-z]*(?:passwords?|passwd|passphrase|passcode|secrets?|token|apikey|accesskey|privatekey|secretkey"
    r"|authkey|credentials?)|pass|pwd|pw|creds|auth|authorization"
)
# "key" names a credential after one of these (api_key, private-key, APP_KEY).
_KEY_QUALIFIERS = frozenset(
    "api access auth private secret signing encryption master account shared consumer app client storage"
    " webhook session license".split()
)
# A last key word that makes the key describe a credential, not hold one.
_METADATA = frozenset(
    """url uri urls endpoint endpoints host hostname port file files filename path paths dir directory folder
    name names id ids type types kind ttl length len size count limit max min expiry expires expire expiration
    expired timeout lifetime age at date time timestamp created updated issued header headers field fields env
    var variable prefix suffix format policy policies hint prompt label description desc help reset rotation
    version scope scopes provider source manager helper mode enabled disabled required regex pattern validator
    strength ref refs arn location region mount issuer audience algorithm alg method backend strategy service
    stdin cmd command class module param parameter option options flag""".split()
)
# Pagination and sync tokens are cursors, not credentials.
_PAGING_WORDS = frozenset({"page", "next", "continuation", "cursor", "sync", "pagination"})
# A key that mentions a credential stem somewhere (cheap pre-filter in the regex).
_KEY_STEM = r"(?=[A-Za-z0-9_.-]{0,63}?(?i:pass|pwd|pw|secret|token|key|auth|cred))"


def _credential_key(key: str) -> tuple[bool, bool]:
    """(names a credential, ends with the credential word) for a key name."""
    parts = [p.lower() for p in _KEY_PARTS.findall(key)]
    while parts and parts[-1].isdigit():
        parts.pop()  # password2, TOKEN_1
    cred = [
        i
        for i, p in enumerate(parts)
        if _CRED_WORD.fullmatch(p) or (p in ("key", "keys") and i and parts[i - 1] in _KEY_QUALIFIERS)
    ]
    if not cred:
        return False, False
    if parts[-1] in _METADATA and cred[-1] != len(parts) - 1 and not (parts[-1] == "id" and "secret" in parts):
        return False, False  # token_url, PASSWORD_FILE, AWS_ACCESS_KEY_ID (but Vault's secret_id)
    if _PAGING_WORDS.intersection(parts):
        return False, False
    return True, cred[-1] == len(parts) - 1


# Identifier paths and calls: request.token, self._password, os.environ,
# settings.SECRET_KEY, getpass, hashlib.sha256, None, api_key_v2.
_REFERENCE = Lazy(r"[$@&*!~]?[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::|->|:|/|-)[A-Za-z_][A-Za-z0-9_]*)*[?!]?")
_WORDS = Lazy(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_VOWELS = frozenset("aeiouyAEIOUY")
# Numbers, versions, dates and times: 4096, 1.2.3, 2024-01-01T10:00:00Z.
_NUMERIC = Lazy(r"[0-9][0-9.,:/+-]*|[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9:.]+(?:Z|[+-][0-9:]+)?)?")
_MARKER = Lazy(r"\[REDACTED:[a-z0-9-]{1,40}\]")
_PATH = Lazy(r"(?:~|\.{1,2})?/[\w.@~+-]+(?:/[\w.@~+-]*)*|[A-Za-z]:\\.*|[\w.-]+/[\w./-]*\.[A-Za-z0-9]{1,5}")


def _is_name(value: str) -> bool:
    """A word, identifier or dotted path (a name for a secret, not one).

    Digits may only trail a word, at most three of them, once (sha256,
    oauth2, api_key_v2). Words of three or more letters must mostly have
    vowels, and a single camelCase token must average three letters a word,
    so random letter soup ("XkqPzLmRtWvB") is not a name.
    """
    if _REFERENCE.fullmatch(value) is None:
        return False
    words = _WORDS.findall(value)
    digit_words = [w for w in words if w.isdigit()]
    if not words or words[0].isdigit() or len(digit_words) > 1 or any(len(w) > 3 for w in digit_words):
        return False
    letters = [w for w in words if not w.isdigit()]
    long_words = [w for w in letters if len(w) >= 3]
    if not long_words or sum(1 for w in long_words if _VOWELS.intersection(w)) * 2 < len(long_words):
        return False
    if len(letters) > 1 and not any(c in value for c in "-_.:/>"):
        return sum(map(len, letters)) >= 3 * len(letters)
    return True


def _is_path(value: str) -> bool:
    return (_PATH.fullmatch(value) is not None or value.lower().startswith(("http://", "https://"))) and not _keyish(
        value.replace("/", " ")
    )


def _plausible(value: str, *, literal: bool, env_style: bool = False, ends_with_cred: bool = False) -> bool:
    """A value bound to a credential-named key that is itself a credential.

    `literal`: the value is quoted (or XML text), so it is data, not code.
    `env_style`: ``UPPER_KEY=value`` with no spaces (.env, shell, Docker),
    where an unquoted word is data too. Entropy plays no part: a
    12-character password, a 32-hex secret or a UUID token all count.
    A ``[REDACTED:kind]`` marker inside the value is not part of it.
    """
    value = _MARKER.sub("", value)
    if len(value) < 8 or any(c.isspace() for c in value) or is_placeholder(value):
        return False
    if _NUMERIC.fullmatch(value) or _is_path(value):
        return False
    if _TOKEN_PREFIX.match(value):
        return True  # ghp_..., sk_live_... with a body its own rule declined: a token, not a name
    letters_only = value.replace("_", "").replace("-", "").replace(".", "").isalpha()
    if env_style and not literal:
        if re.fullmatch(r"[A-Z_]+", value):
            return False  # TOKEN=GITHUB_TOKEN names a variable
        if letters_only and ends_with_cred:
            return True  # DB_PASSWORD=<a plain word>
    if literal or env_style:
        # A quoted word or identifier ("access_token", "db-creds", "AutoTokenizer")
        # names something; a quoted word with digits ("Welcome1") is a password.
        has_separator = any(c in value for c in "-_.:/")
        return not (_is_name(value) and (letters_only or has_separator))
    return not _is_name(value)


# ---- rule patterns -----------------------------------------------------------------------------------

# A plain class keeps the capped scan fast. An unquoted value stops before
# "----" (an adjacent "-----BEGIN") and at "&" only before "key=".
_BARE = r"""(?:[^\s"'`,;()\[\]{}<>&|\\-]|-(?!---)|&(?![A-Za-z_][A-Za-z0-9_]*=))"""
_SCHEME = r"(?:(?:bearer|basic|token)[ \t]+)?"
_VALUE = (
    r'(?:\\"' + _SCHEME + _atomic("eq", r'[^"\\\r\n]{1,512}') + r'\\"'
    r'|"' + _SCHEME + _atomic("dq", r'[^"\r\n]{1,512}') + '"'
    r"|'" + _SCHEME + _atomic("sq", r"[^'\r\n]{1,512}") + "'"
    r"|" + _SCHEME + _atomic("bare", _BARE + "{1,512}") + f"(?!{_BARE}))"
)
# key [quote] op value. The key starts at a word start ("--" flags allowed);
# "]" after the key only closes a quoted subscript (env["TOKEN"]): a bare
# "token]" is the tail of a [REDACTED:github-token] marker, not a key.
_ASSIGN = (
    r"(?<![A-Za-z0-9_./-])" + _KEY_STEM + r"(?P<key>-{0,2}[A-Za-z_][A-Za-z0-9_.-]{0,63})"
    r"(?P<kq>\\?[\"']\]?)?(?P<op>[ \t]{0,16}(?:=>|:=|={1,3}|:)[ \t]{0,16})" + _VALUE
)
# --password value (a command-line flag, value after whitespace).
_FLAG = (
    _lead("--", 2, r"A-Za-z0-9_.-") + _KEY_STEM + r"(?P<key>[A-Za-z][A-Za-z0-9_.-]{0,63})[ \t]{1,16}"
    r'(?:"' + _atomic("dq", r'[^"\r\n]{1,512}') + '"'
    r"|'" + _atomic("sq", r"[^'\r\n]{1,512}") + "'"
    r"|(?!-)" + _atomic("bare", _BARE + "{1,512}") + f"(?!{_BARE}))"
)
# <password>value</password> (Maven settings.xml and friends).
_XML = (
    r"<"
    + _KEY_STEM
    + r"(?P<key>[A-Za-z_][A-Za-z0-9_.:-]{0,63})>[ \t]*"
    + _atomic("xml", r"[^<>\s]{1,512}")
    + r"[ \t]*</(?P=key)>"
)
# curl -u user:password / --user=user:password (HTTP basic auth on a command line).
_USER_FLAG = (
    _lead("-", 1, r"A-Za-z0-9_-")
    + r"(?:u|-user)(?:[ \t]{1,16}|=)?[\"']?"
    + _atomic("user", r"[^\s:\"'<>\[\]]{1,128}")
    + ":"
    + _atomic("pw", r"[^\s\"'<>@\[\]]{1,256}")
)
_URL_CREDS = (
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,30}://"
    + _atomic("user", r"[^\s/?#@:\"'<>\[\]]{0,128}")
    + ":"
    + _atomic("pw", r"[^\s/?#@\"'<>]{1,256}")
    + "@"
)
# machine <host> [login <u>] [account <a>] [port <p>] password <pw> (or
# "default ..."), on one line or across lines, as in ~/.netrc.
_WS = r"[ \t\r\n]+"
_NETRC = (
    _lead("(?:machine|default)", 7, r"A-Za-z0-9_.-")
    + r"(?:(?<=machine)"
    + _WS
    + _atomic("host", r"[^\s]{1,256}")
    + "|(?<=default))"
    r"(?:"
    + _WS
    + r"(?:login|account|port)"
    + _WS
    + r"[^\s]{1,256}){0,3}?"
    + _WS
    + "password"
    + _WS
    + _atomic("pw", r"[^\s]{1,256}")
)


# Between a Twilio SID (SK.../AC...) and its secret: punctuation or
# whitespace, optionally one label ("secret", "TWILIO_API_SECRET=").
_GLUE_CHARS = r"""[\s:;,|/'"=()\[\]{}]"""
_TWILIO_GLUE = f"{_GLUE_CHARS}{{1,8}}(?:[A-Za-z][A-Za-z0-9_. -]{{0,38}}{_GLUE_CHARS}{{1,8}})?"


# ---- validators -------------------------------------------------------------------------------------


def _entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


def _random_body(m: re.Match[str]) -> bool:
    """Prefixed tokens: reject filler such as AKIA + "X" * 16."""
    body = m.group("body")
    return not _filler(body) and _entropy(body) >= 2.5


def _api_key(m: re.Match[str]) -> bool:
    """sk- keys: need digits, letters and one long random run ("sk-learn-x" is not)."""
    body = m.group("body")
    longest = max(len(part) for part in body.replace("_", "-").split("-"))
    has_digit = any(c.isdigit() for c in body)
    return longest >= 16 and has_digit and any(c.isalpha() for c in body) and _random_body(m)


def _mixed_case(m: re.Match[str]) -> bool:
    """Hugging Face tokens mix cases; a long lowercase identifier (hf_transformers...) is not one."""
    body = m.group("body")
    return any(c.isupper() for c in body) and any(c.islower() for c in body) and _random_body(m)


def _pem(m: re.Match[str]) -> bool:
    """A header alone (in prose or docs) carries no key material."""
    return re.search(r"[A-Za-z0-9+/]{32}", m.group("body")) is not None


def _jwt(m: re.Match[str]) -> bool:
    """The header must decode to a JSON object naming an algorithm."""
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


def _sas_signature(m: re.Match[str]) -> bool:
    """An Azure SAS ``sig=`` is an HMAC-SHA256: 32 bytes of base64, maybe URL-encoded."""
    from urllib.parse import unquote  # only for a URL with credentials in it

    raw = unquote(m.group("body"))
    try:
        decoded = binascii.a2b_base64(raw + "=" * (-len(raw) % 4))
    except (binascii.Error, ValueError):
        return False
    return len(decoded) == 32 and not _filler(raw)


def _url_password(m: re.Match[str]) -> bool:
    """Skip dev defaults (postgres:postgres@), user == password and placeholders."""
    pw = m.group("pw")
    return len(pw) >= 6 and pw != m.group("user") and not is_placeholder(pw)


def _netrc_password(m: re.Match[str]) -> bool:
    """A "default" entry needs a login, so prose ("by default password ...") is not one."""
    pw = m.group("pw")
    if m.group("host") is None and re.search(r"\slogin\s", m.group(0)) is None:
        return False
    return len(pw) >= 6 and not is_placeholder(pw)


def _user_flag(m: re.Match[str]) -> bool:
    """A password, not a group (docker -u app:appgroup) or a port (-u 1000:1000)."""
    pw = m.group("pw")
    return pw != m.group("user") and _plausible(pw, literal=True)


def _mixed_digits(m: re.Match[str]) -> bool:
    """Letters in both cases and digits: a random token, not an identifier (``secret_threshold...``)."""
    body = m.group("body")
    return (
        any(c.isupper() for c in body)
        and any(c.islower() for c in body)
        and any(c.isdigit() for c in body)
        and _random_body(m)
    )


def _twilio(m: re.Match[str]) -> bool:
    """A Twilio secret next to its key SID: 32 letters and digits that are random, not a word or a digest label."""
    body = m.group("body")
    has_digit, has_alpha = any(c.isdigit() for c in body), any(c.isalpha() for c in body)
    return has_digit and has_alpha and not _filler(body) and _entropy(body) >= 3.0


def _vault_legacy(m: re.Match[str]) -> bool:
    """``s.`` + 24: only a random mix of cases and digits (``s.getElementsByTagName`` is a call)."""
    body = m.group("body")
    return _mixed_digits(m) and _entropy(body) >= 3.5 and not _is_name(body)


# Punctuation that ends a sentence or a statement, not an unquoted value.
_TRAILING = ".:"


def _assigned(m: re.Match[str]) -> tuple[str, bool]:
    """The assigned value (unquoted: without a trailing "." or ":") and whether it was quoted."""
    for name in ("eq", "dq", "sq", "xml"):
        if name in m.re.groupindex and m.group(name) is not None:
            return m.group(name), True
    return m.group("bare").rstrip(_TRAILING), False


def _assignment(m: re.Match[str]) -> bool:
    """A plausible credential bound to a credential-named key, not a reference to one."""
    credential, ends_with_cred = _credential_key(m.group("key").lstrip("-"))
    if not credential:
        return False
    value, quoted = _assigned(m)
    if not quoted and m.string.startswith(("(", "[", "{"), m.end()):
        return False  # token = make_token(...), os.environ["X"], Token{...}
    groups = m.re.groupindex
    env_style = (
        "op" in groups
        and m.group("op") == "="
        and not m.group("kq")
        and re.fullmatch(r"[A-Z][A-Z0-9_]*", m.group("key")) is not None
    )
    return _plausible(value, literal=quoted, env_style=env_style, ends_with_cred=ends_with_cred)


def _rule(
    kind: str,
    pattern: str,
    validator: Callable[[re.Match[str]], bool] | None = None,
    groups: tuple[str, ...] = (),
    flags: int = 0,
    *,
    gate: str | tuple[tuple[str, ...], ...],
    folded: bool = False,
) -> Rule:
    """`gate`: the literals every match holds (one literal clause, or `Gated`'s alternatives)."""
    alts = ((gate,),) if isinstance(gate, str) else gate
    return Rule(kind, Gated(pattern, flags, gate=alts, folded=folded), validator, groups)


def _prefixed(
    kind: str,
    prefix: str,
    width: int,
    body: str,
    validator: Callable[[re.Match[str]], bool] = _random_body,
    *,
    gate: str,
) -> Rule:
    """A token: `prefix` (`width` characters) then a `body` run, with no token character on either side."""
    return _rule(kind, _lead(prefix, width) + "(?P<body>" + body + ")" + _AFTER, validator, gate=gate)


_VALUE_GROUPS = ("eq", "dq", "sq", "bare")

# Credential stems a key must hold (`_KEY_STEM`; "pw" covers "pwd"), as a case-folded gate clause.
_STEMS = "pass|pw|secret|token|key|auth|cred"

# Order is precedence: a rule whose matches can contain another's comes first.
# Each gate names literals every match holds (see `gate.Gated`): a fixed
# prefix, or for the context rules the credential stem and the operator.
RULES: tuple[Rule, ...] = (
    _rule("private-key", _PEM_HEAD + _PEM_BODY + f"(?:{_PEM_TAIL})?", _pem, gate="PRIVATE KEY"),
    _rule(
        "jwt",
        _lead("(?P<header>eyJ", 3, r"A-Za-z0-9_.\]-") + r"[A-Za-z0-9_-]{8,})\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*",
        _jwt,
        gate="eyJ",
    ),
    _rule(
        "slack-token",
        _lead("h", 1, r"A-Za-z0-9_.-") + r"(?:ttps?://hooks|ooks)\.slack(?:-gov)?\.com/(?:services|workflows|triggers)/"
        r"(?P<body>[A-Za-z0-9_/-]{16,})",
        _random_body,
        gate="ooks.slack",
    ),
    _rule(
        "discord-webhook",
        r"discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/(?P<body>[A-Za-z0-9_-]{60,68})" + _AFTER,
        _random_body,
        gate=".com/api/webhooks/",
    ),
    _rule(
        "azure-storage-key",
        r"(?:AccountKey|SharedAccessKey)[ \t]*=[ \t]*(?P<body>[A-Za-z0-9+/]{20,256}={0,2})",
        _random_body,
        ("body",),
        gate="AccountKey|SharedAccessKey",
    ),
    _rule(
        "azure-sas-token",
        _lead("sig=", 4, r"A-Za-z0-9_%") + r"(?P<body>(?:[A-Za-z0-9+/]|%2[BbFf]){40,120}(?:=|%3[Dd]){0,2})",
        _sas_signature,
        ("body",),
        gate="sig=",
    ),
    _rule("anthropic-api-key", _lead("sk-ant-", 7) + "(?P<body>" + _RUN + "{20,})", _api_key, gate="sk-ant-"),
    _rule("openai-api-key", _lead("sk-", 3) + "(?!ant-)(?P<body>" + _RUN + "{20,})", _api_key, gate="sk-"),
    _prefixed("stripe-key", r"[sr]k_(?:live|test)_", 8, "[A-Za-z0-9]{20,}", gate="k_live_|k_test_"),
    _prefixed("stripe-webhook-secret", "whsec_", 6, "[A-Za-z0-9+/]{24,}={0,2}", gate="whsec_"),
    _prefixed("github-token", "github_pat_", 11, "[A-Za-z0-9_]{36,251}", gate="github_pat_"),
    _prefixed("github-token", "gh[pousr]_", 4, "[A-Za-z0-9]{36,251}", gate="ghp_|gho_|ghu_|ghs_|ghr_"),
    _rule(
        "gitlab-token",
        _lead("gl", 2) + "(?:pat|ptt|dt|rt|cbt|oas|soat|ft|imt|agent)-(?P<body>" + _RUN + "{20,})",
        _random_body,
        gate="glpat-|glptt-|gldt-|glrt-|glcbt-|gloas-|glsoat-|glft-|glimt-|glagent-",
    ),
    _prefixed("gitlab-token", "GR1348941", 9, "[A-Za-z0-9_-]{20,}", gate="GR1348941"),
    _rule(
        "slack-token",
        _lead("xox", 3) + r"(?:e\.xox)?[abcdeoprs]-(?P<body>[0-9]{1,20}-" + _SLACK_RUN + "{8,})",
        _random_body,
        gate="xox",
    ),
    _rule(
        "slack-token",
        _lead("xox", 3) + r"(?:e\.xox)?[abcdeoprs]-(?P<body>" + _SLACK_RUN + "{20,})",
        _api_key,
        gate="xox",
    ),
    _rule(
        "slack-token", _lead("xapp-", 5) + "(?P<body>[0-9]{1,3}-" + _SLACK_RUN + "{16,})", _random_body, gate="xapp-"
    ),
    _rule(
        "google-oauth-token",
        _lead(r"ya29\.", 5, r"A-Za-z0-9_.\]-") + "(?P<body>" + _RUN + "{20,})",
        _random_body,
        gate="ya29.",
    ),
    _rule(
        "google-client-secret", _lead("GOCSPX-", 7) + "(?P<body>" + _RUN + "{20,})", _random_body, gate="GOCSPX-"
    ),
    _rule(
        "gcp-api-key",
        _lead("AIza", 4, _B64_CHARS) + "(?P<body>[0-9A-Za-z_-]{35})" + _B64_AFTER,
        _random_body,
        gate="AIza",
    ),
    _rule(
        "aws-access-key",
        _lead("(?:AKIA|ASIA)", 4, _B64_CHARS) + "(?P<body>[A-Z0-9]{16})" + _B64_AFTER,
        _random_body,
        gate="AKIA|ASIA",
    ),
    _prefixed("npm-token", "npm_", 4, "[A-Za-z0-9]{36,}", gate="npm_"),
    _prefixed("pypi-token", "pypi-", 5, "AgE" + _RUN + "{50,}", gate="pypi-"),
    _prefixed("huggingface-token", "hf_", 3, "[A-Za-z0-9]{34,}", _mixed_case, gate="hf_"),
    _rule(
        "sendgrid-key",
        _lead(r"SG\.", 3, r"A-Za-z0-9_.\]-") + r"[A-Za-z0-9_-]{16,32}\.(?P<body>[A-Za-z0-9_-]{30,64})" + _AFTER,
        _random_body,
        gate="SG.",
    ),
    _prefixed("digitalocean-token", "do[opr]_v1_", 7, "[a-f0-9]{64}", gate="_v1_"),
    _prefixed("shopify-token", "shp(?:at|ca|pa|ss)_", 6, "[a-fA-F0-9]{32}", gate="shp"),
    _rule(
        "telegram-bot-token",
        # the first digit, then: after "/bot" (an API URL) or after no token character
        r"(?P<tok>[0-9](?:(?<=/bot[0-9])|(?<![A-Za-z0-9_:][0-9]))[0-9]{7,9}:(?P<body>AA[A-Za-z0-9_-]{33}))"
        r"(?![A-Za-z0-9_-])",
        _random_body,
        ("tok",),
        gate=":AA",
    ),
    _rule(
        "twilio-api-key",
        _lead("(?:SK|AC)", 2) + "[0-9a-f]{32}" + _AFTER + _TWILIO_GLUE + "(?P<body>[A-Za-z0-9]{32})" + _AFTER,
        _twilio,
        ("body",),
        gate="SK|AC",
    ),
    _prefixed("databricks-token", "dapi", 4, "[0-9a-f]{32}(?:-[0-9]{1,2})?", gate="dapi"),
    _rule(
        "vault-token",
        _lead(r"hv[sbr]\.", 4, r"A-Za-z0-9_.\]-") + "(?P<body>[A-Za-z0-9_-]{24,})" + _AFTER,
        _random_body,
        gate="hvs.|hvb.|hvr.",
    ),
    _rule(
        "vault-token",
        _lead(r"s\.", 2, r"A-Za-z0-9_.\]-") + r"(?P<body>[A-Za-z0-9]{24})(?![A-Za-z0-9_\[(.-])",
        _vault_legacy,
        gate="s.",
    ),
    _rule(
        "terraform-token",
        r"(?<![A-Za-z0-9_.\]-])[A-Za-z0-9]{14}\.atlasv1\.(?P<body>[A-Za-z0-9_=-]{60,70})" + _AFTER,
        _random_body,
        gate=".atlasv1.",
    ),
    _prefixed("atlassian-api-token", "ATATT3", 6, "[A-Za-z0-9_=-]{100,}", gate="ATATT3"),
    _prefixed("grafana-token", "glsa_", 5, "[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", gate="glsa_"),
    _prefixed("grafana-token", "glc_", 4, "[A-Za-z0-9+/]{32,400}={0,2}", gate="glc_"),
    _prefixed("sentry-token", "sntrys_", 7, "eyJ[A-Za-z0-9+/=_-]{50,}", gate="sntrys_"),
    _prefixed("sentry-token", "sntryu_", 7, "[a-f0-9]{64}", gate="sntryu_"),
    _rule(
        "age-secret-key",
        _lead("AGE-SECRET-KEY-1", 16) + "(?P<body>[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58})" + _AFTER,
        _random_body,
        gate="AGE-SECRET-KEY-1",
    ),
    _prefixed("postman-api-key", "PMAK-", 5, "[a-f0-9]{24}-[a-f0-9]{34}", gate="PMAK-"),
    _prefixed("doppler-token", r"dp\.", 3, r"(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,44}", gate="dp."),
    _prefixed("planetscale-token", "pscale_", 7, "(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,64}", gate="pscale_"),
    _prefixed("pulumi-token", "pul-", 4, "[a-f0-9]{40}", gate="pul-"),
    _prefixed("linear-api-key", "lin_api_", 8, "[A-Za-z0-9]{40}", gate="lin_api_"),
    _prefixed("supabase-token", "sbp_", 4, "[a-f0-9]{40}", gate="sbp_"),
    _prefixed("supabase-token", "sb_secret_", 10, "[A-Za-z0-9_-]{20,}", gate="sb_secret_"),
    _prefixed("docker-hub-token", "dckr_", 5, "(?:pat|oat)_[A-Za-z0-9_-]{27,}", gate="dckr_pat_|dckr_oat_"),
    _prefixed("rubygems-token", "rubygems_", 9, "[a-f0-9]{48}", gate="rubygems_"),
    _prefixed("new-relic-key", "NRAK-", 5, "[A-Z0-9]{27}", gate="NRAK-"),
    _prefixed(
        "tailscale-key", "tskey-", 6, "(?:auth|api|client|scim|webhook)-[A-Za-z0-9]{8,}-[A-Za-z0-9]{20,}", gate="tskey-"
    ),
    _prefixed("langsmith-api-key", "lsv2_", 5, "(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}", gate="lsv2_"),
    _prefixed("groq-api-key", "gsk_", 4, "[A-Za-z0-9]{52}", gate="gsk_"),
    _prefixed("replicate-token", "r8_", 3, "[A-Za-z0-9]{37}", _mixed_digits, gate="r8_"),
    _prefixed("perplexity-api-key", "pplx-", 5, "[A-Za-z0-9]{48}", gate="pplx-"),
    _prefixed("xai-api-key", "xai-", 4, "[A-Za-z0-9]{80}", _mixed_digits, gate="xai-"),
    _prefixed("square-token", "sq0", 3, "(?:atp|csp)-[A-Za-z0-9_-]{22,43}", gate="sq0atp-|sq0csp-"),
    _prefixed("brevo-api-key", "xkeysib-", 8, "[a-f0-9]{64}-[A-Za-z0-9]{16}", gate="xkeysib-"),
    _prefixed("dynatrace-token", r"dt0c01\.", 7, r"[A-Z0-9]{24}\.[A-Z0-9]{64}", gate="dt0c01."),
    _prefixed("notion-token", "ntn_", 4, "[A-Za-z0-9]{46}", _mixed_digits, gate="ntn_"),
    _prefixed("notion-token", "secret_", 7, "[A-Za-z0-9]{43}", _mixed_digits, gate="secret_"),
    _rule("url-credentials", _URL_CREDS, _url_password, ("pw",), gate=(("://", "@"),)),
    _rule("netrc-password", _NETRC, _netrc_password, ("pw",), gate=(("machine|default", "password"),)),
    _rule(
        "assignment", _ASSIGN, _assignment, _VALUE_GROUPS, re.IGNORECASE, gate=((_STEMS, "=|:"),), folded=True
    ),
    _rule("assignment", _FLAG, _assignment, ("dq", "sq", "bare"), re.IGNORECASE, gate=(("--", _STEMS),), folded=True),
    _rule("assignment", _XML, _assignment, ("xml",), gate=(("</", _STEMS),), folded=True),
    _rule("assignment", _USER_FLAG, _user_flag, ("pw",), gate="-u"),
)


def _span(m: re.Match[str], groups: tuple[str, ...]) -> tuple[int, int]:
    for name in groups:
        if m.group(name) is not None:
            start, end = m.span(name)
            if name == "bare":  # a sentence may end right after an unquoted value
                end = start + len(m.group(name).rstrip(_TRAILING))
            return start, end
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


def _rule_spans(text: str) -> list[_Span]:
    spans: list[_Span] = []
    folded = fold(text)
    for rank, rule in enumerate(RULES):
        if not rule.gated.may_match(text, folded):
            continue  # no literal it needs: not compiled, not run
        for start, end in _candidates(rule, text):
            _place(spans, start, end, rank, rule.kind)
    return spans


def _spans(text: str) -> list[_Span]:
    """The rules on `text`, and on one layer of base64 or percent encoding in it."""
    spans = _rule_spans(text)
    for start, end, rank, kind in _decoded_spans(text):
        _place(spans, start, end, rank, kind)
    return spans


# ---- one layer of encoding ---------------------------------------------------------------------------
# A secret base64-wrapped once (a Kubernetes Secret's ``tls.key``, a
# Basic header, a JSON blob) or percent-encoded in a URL is decoded and
# scanned with the same rules; a finding covers its encoded source. Only
# one layer: decoded text is not decoded again. The work is bounded:
# base64 needs a run of 24+ characters that decodes to text (binary such
# as images and digests is dropped after one decode), and all decoded text
# together stays within `_DECODE_BUDGET` characters, twice a body's limit.

_DECODE_BUDGET = 128 * 1024
# Standard or URL-safe base64, maybe padded, maybe wrapped: more runs after
# a newline (or a JSON "\n" escape) and indentation. A block starts a run
# and holds a capital, digit, "+" or "/" early on: base64 of text always
# does, lower-case names (snake_case, kebab-case) never.
_B64_BLOCK = Lazy(
    r"(?<![A-Za-z0-9+/_-])(?=[a-z_-]{0,32}[A-Z0-9+/])[A-Za-z0-9+/_-]{24,}={0,2}"
    r"(?:(?:\\n|\r?\n)[ \t]*[A-Za-z0-9+/_-]{4,}={0,2})*"
)
_B64_LINE = Lazy(r"(?:\\n)?(?P<line>[A-Za-z0-9+/_=-]+)")
_URLSAFE = str.maketrans("-_", "+/")
# Hex (with dashes) never encodes a secret's text: base64 of text always holds capitals.
_HEXISH = Lazy(r"[0-9a-f\s-]+=*|[0-9A-F\s-]+=*")
_UNPRINTABLE = Lazy(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")
_PCT_SEQ = Lazy(r"(?:%[0-9A-Fa-f]{2})+")
# Decoded text from different sources is joined with a separator no rule crosses.
_SEP = "\n\x00\n"

# An escape sequence: (decoded start, decoded end, original start, original end).
_Escape = tuple[int, int, int, int]
# A decoded source: (original start, original end, decoded text, escapes; None: any position is the whole source).
_Source = tuple[int, int, str, list[_Escape] | None]


def _texty(chunk: str) -> bool:
    """`chunk` (a multiple of 4 base64 characters) decodes to text, not binary."""
    if not chunk:
        return False
    try:
        head = binascii.a2b_base64(chunk.translate(_URLSAFE)).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return False
    return len(_UNPRINTABLE.findall(head)) <= 2


def _b64_text(block: str) -> tuple[int, int, str] | None:
    """(start, end, text) of the wrapped base64 in `block`, or None when it decodes to binary.

    A wrapped block has lines of one width and a shorter last line: a name
    on the line above (whose width would shift every byte) and a word on
    the line below are not part of it.
    """
    if _HEXISH.fullmatch(block):
        return None  # git object ids, digests, UUIDs, one per line
    lines = [m.span("line") for m in _B64_LINE.finditer(block)]
    if len(lines) > 2 and lines[0][1] - lines[0][0] != lines[1][1] - lines[1][0]:
        lines = lines[1:]
    found = _b64_lines(block, lines)
    if found is None and len(lines) > 1:
        found = _b64_lines(block, lines[1:])  # a name line above a one-line block
    return found


def _b64_lines(block: str, lines: list[tuple[int, int]]) -> tuple[int, int, str] | None:
    first = block[lines[0][0] : lines[0][1]]
    if _HEXISH.fullmatch(first) or not _texty(first[: min(len(first), 24) // 4 * 4]):
        return None  # digests, UUIDs and binary (images, DER, random ids): turned away before a full decode
    width = len(first)
    last = next((i for i, (a, b) in enumerate(lines) if b - a != width), len(lines) - 1)
    lines = lines[: last + 1]
    raw = "".join(block[a:b] for a, b in lines).rstrip("=").translate(_URLSAFE)
    if len(raw) % 4 == 1:
        raw = raw[:-1]
    try:
        data = binascii.a2b_base64(raw + "=" * (-len(raw) % 4))
    except (binascii.Error, ValueError):
        return None
    decoded = data.decode("utf-8", "replace")
    if len(_UNPRINTABLE.findall(decoded)) > 2 + len(decoded) // 16:
        return None
    return lines[0][0], lines[-1][1], decoded


def _percent_text(text: str) -> tuple[str, list[_Escape]]:
    """`text` with its %XX sequences decoded as UTF-8, and where each sequence came from.

    A sequence that is not UTF-8 stays as it is.
    """
    parts: list[str] = []
    escapes: list[_Escape] = []
    pos = length = 0
    for m in _PCT_SEQ.finditer(text):
        try:
            decoded = bytes.fromhex(m.group().replace("%", "")).decode("utf-8")
        except UnicodeDecodeError:
            continue  # not UTF-8, so not an escape: %DB_PASSWORD%, printf's %de
        parts.append(text[pos : m.start()])
        length += m.start() - pos
        escapes.append((length, length + len(decoded), m.start(), m.end()))
        parts.append(decoded)
        length += len(decoded)
        pos = m.end()
    parts.append(text[pos:])
    return "".join(parts), escapes


def _encoded(text: str) -> list[_Source]:
    """Every base64 block worth scanning, and the text percent-decoded if it has escapes, within the budget."""
    sources: list[_Source] = []
    budget = _DECODE_BUDGET
    for m in _B64_BLOCK.finditer(text):
        found = _b64_text(m.group())
        if found is not None:
            start, end, decoded = found
            budget -= len(decoded)
            if budget < 0:
                return sources
            sources.append((m.start() + start, m.start() + end, decoded, None))
    if "%" in text and _PCT_SEQ.search(text) is not None and len(text) <= budget:
        # One source for the whole text: cheaper than a source per URL when escapes abound.
        decoded, escapes = _percent_text(text)
        if escapes:
            sources.append((0, len(text), decoded, escapes))
    return sources


def _origin(source: _Source, pos: int, is_end: bool) -> int:
    """Where decoded position `pos` (or, with `is_end`, the end of the character at `pos`) lies in the text."""
    start, end, decoded, escapes = source
    if escapes is None:
        return end if is_end else start
    pos = min(max(pos, 0), max(len(decoded) - 1, 0))
    i = bisect_right(escapes, (pos, len(decoded) + 1)) - 1
    if i >= 0 and pos < escapes[i][1]:
        return escapes[i][3] if is_end else escapes[i][2]  # inside an escape sequence: all of it
    base = start + pos if i < 0 else escapes[i][3] + pos - escapes[i][1]
    return min(base + 1 if is_end else base, end)


def _decoded_spans(text: str) -> list[_Span]:
    """Findings in the decoded sources, mapped back to the encoded text they came from."""
    sources = _encoded(text)
    if not sources:
        return []
    starts, pos = [], 0
    for source in sources:
        starts.append(pos)
        pos += len(source[2]) + len(_SEP)
    inner = _SEP.join(source[2] for source in sources)
    out: list[_Span] = []
    for start, end, rank, kind in _rule_spans(inner):
        i = bisect_right(starts, start) - 1
        j = bisect_right(starts, end - 1) - 1
        lo = _origin(sources[i], start - starts[i], False)
        hi = _origin(sources[j], end - 1 - starts[j], True)
        out.append((lo, max(hi, lo + 1), rank, kind))
    return out


def _apply(text: str, spans: list[tuple[int, int, str]]) -> str:
    parts: list[str] = []
    pos = 0
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

    A value rejected only because of the secret beside it is a finding once
    that secret is a marker; reporting it here means redact() leaves
    nothing to find.
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
