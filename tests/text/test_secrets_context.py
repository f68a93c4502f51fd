"""Context rules of agentmsg.text.secrets: assignments, the placeholder rule, references.

A value bound to a credential-named key is a secret when it is a plausible
credential (8+ characters, not a placeholder, not a reference to a
variable), whatever its entropy. As in test_secrets.py, secret-shaped
values are built at run time so that no credential sits in the repo as a
literal.
"""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmsg.text.secrets import is_placeholder, redact, scan

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
PASSWORD = "pass" + "word"


def rnd(alphabet: str, n: int, seed: int) -> str:
    r = random.Random(seed)
    return "".join(r.choice(alphabet) for _ in range(n))


def uuid(seed: int) -> str:
    h = rnd(HEX, 32, seed)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


# Values below the old entropy bar: a 12-character password, a 32-hex secret, a UUID, 8 characters.
SHORT_VALUES = ["Tr0ub4dor&3x", "Summer2024!x", rnd(HEX, 32, 1), uuid(2), "k8s-Pw42", "x9Lq2mZt"]

# Key names: every credential word, with prefixes and suffixes, in any case and separator style.
KEYS = [
    PASSWORD,
    "DB_" + PASSWORD.upper(),
    "MYSQL_ROOT_" + PASSWORD.upper(),
    "userPassword",
    "passwd",
    "pwd",
    "DB_PWD",
    "pass",
    "SMTP_PASS",
    "passphrase",
    "secret",
    "client_secret",
    "clientSecret",
    "JWT_SECRET",
    "webhook-secret",
    "token",
    "access_token",
    "accessToken",
    "AUTH_TOKEN",
    "x-auth-token",
    "GITHUB_TOKEN",
    "refresh-token",
    "api_key",
    "apikey",
    "api-key",
    "ApiKey",
    "X-API-KEY",
    "OPENAI_API_KEY",
    "private_key",
    "privateKey",
    "SECRET_KEY",
    "secret_access_key",
    "app_key",
    "credentials",
    "creds",
    "spring.datasource." + PASSWORD,
    PASSWORD + "2",
]

# (format, template): the value goes where {v} is; {k} is the key.
FORMATS = [
    ("env", "{k}={v}"),
    ("export", 'export {k}="{v}"'),
    ("yaml", "{k}: {v}"),
    ("yaml-quoted", "{k}: '{v}'"),
    ("json", '{{"{k}": "{v}"}}'),
    ("toml", '{k} = "{v}"'),
    ("python", "{k} = '{v}'"),
    ("go", '{k} := "{v}"'),
    ("php", "'{k}' => '{v}',"),
    ("json-escaped", '"{{\\"{k}\\": \\"{v}\\"}}"'),
    ("query", "https://api.example.com/v1?{k}={v}&page=2"),
    ("flag", "deploy --{k} {v}"),
    ("flag-equals", "deploy --{k}={v}"),
    ("xml", "<{k}>{v}</{k}>"),
    ("end-of-sentence", "Use {k}={v}."),
    ("parenthesised", "(set {k}={v})"),
]


def _combos() -> list[tuple[str, str, str]]:
    out = []
    for i, key in enumerate(KEYS):
        for j, (name, template) in enumerate(FORMATS):
            if name == "xml" and "." in key:
                continue
            value = SHORT_VALUES[(i + j) % len(SHORT_VALUES)]
            if name == "query" and "&" in value:
                value = value.replace("&", "9")
            out.append((f"{key}-{name}", template.format(k=key, v=value), value))
    return out


COMBOS = _combos()


@pytest.mark.parametrize(("text", "value"), [c[1:] for c in COMBOS], ids=[c[0] for c in COMBOS])
def test_short_credentials_bound_to_credential_names_are_found(text: str, value: str) -> None:
    found = scan(text)
    assert [(f.kind, text[f.start : f.end]) for f in found] == [("assignment", value)]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Authorization: Basic " + "dXNlcjpQNHNzdzByZA==", "dXNlcjpQNHNzdzByZA=="),
        ("curl -u deploy:" + "Tr0ub4dor&3x" + " https://x.example/hook", "Tr0ub4dor&3x"),
        ("curl --user=deploy:" + "k8s-Pw42" + " https://x.example/hook", "k8s-Pw42"),
        ("DB_" + PASSWORD.upper() + "=supersecret", "supersecret"),  # .env style: a plain word is data
        (f'{PASSWORD} = "Welcome1"', "Welcome1"),  # quoted: a word with a digit is a password
        (f"{PASSWORD}: Summer2024", "Summer2024"),  # unquoted, but not a name (four digits)
        ("secret_id: " + uuid(3), uuid(3)),  # Vault AppRole secret ids are secrets
        ("DB_" + PASSWORD.upper() + "=${DB_" + PASSWORD.upper() + ":-Tr0ub4dor3x}", "-Tr0ub4dor3x"),  # a default
    ],
)
def test_other_credential_shapes(text: str, value: str) -> None:
    found = scan(text)
    assert [(f.kind, text[f.start : f.end]) for f in found] == [("assignment", value)]


@pytest.mark.parametrize(
    "value",
    [
        "gh" + "p_" + "ab" * 18,  # a real prefix, a low-entropy body: github-token declines
        "sk" + "_live_" + "ab" * 12,
        "AK" + "IA" + "AB" * 8,
        "glp" + "at-" + "abcd" * 5,
        "xo" + "xb-" + "12-" + "ab" * 10,
    ],
)
def test_a_specific_rule_declining_does_not_stop_the_assignment_rule(value: str) -> None:
    text = f"GITHUB_TOKEN={value}"
    assert [(f.kind, text[f.start : f.end]) for f in scan(text)] == [("assignment", value)]
    text = f'{{"api_key": "{value}"}}'
    assert [(f.kind, text[f.start : f.end]) for f in scan(text)] == [("assignment", value)]


# ---- the placeholder rule ----------------------------------------------------------------------------

PLACEHOLDERS = [
    # 1. templates, variables and markers
    "<your-token>",
    "<token from step 2>",
    "<API_KEY>",
    "[REDACTED:assignment]",
    "[REDACTED]",
    "{token}",
    "{{ db_password }}",
    "{{.Values.database.password}}",
    "${TOKEN}",
    "${{ secrets.GITHUB_TOKEN }}",
    "$TOKEN",
    "$env:API_KEY",
    "$(cat /run/secrets/token)",
    "`pass show db`",
    "%DB_PASSWORD%",
    "%s",
    "%(password)s",
    "__TOKEN__",
    "@DB_PASSWORD@",
    "#{api_key}",
    # 2. one character repeated
    "xxxxxxxx",
    "XXXXXXXXXXXXXXXX",
    "********",
    "00000000",
    "xxxx-xxxx-xxxx-xxxx",
    "A" * 86 + "==",
    # 3. masked or elided
    "...",
    "sk-...",
    "ghp_…",
    "****abcd",
    "abcd...wxyz",
    # 4. placeholder words, alone or together, with up to three digits
    "changeme",
    "CHANGEME",
    "change-me",
    "changeit",
    PASSWORD,
    PASSWORD + "123",
    "secret",
    "example",
    "placeholder",
    "your-token-here",
    "YOUR_API_KEY_HERE",
    "your_api_key",
    "insert-your-key",
    "redacted",
    "dummy",
    "dummy-token-123",
    "test",
    "test123",
    "testing",
    "none",
    "null",
    "empty",
    "undefined",
    "todo",
    "fake-secret",
    "not-a-real-token",
    # 5. local-development defaults
    "postgres",
    "admin",
    "root",
    # 6. a token prefix with filler or a placeholder
    "ghp_" + "x" * 36,
    "sk-your-key-here",
    "sk_live_XXXXXXXXXXXXXXXXXXXXXXXX",
    "AKIA" + "IOSFODNN7" + "EXAMPLE",
    "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY",
]

# Values that must NOT pass as placeholders: a placeholder word or wrapper is no cover for key material.
NOT_PLACEHOLDERS = [
    "changeme" + "Xk9mP2qLr8zT",
    "changeme-" + "Xk9mP2qLr8zT",
    "Xk9mP2qLr8zT" + "-example",
    "<Xk9mP2qLr8zT>",
    "[Xk9mP2qLr8zT]",
    "{" + "Xk9mP2qLr8zT" + "}",
    "${DB_PASSWORD:-Xk9mP2qLr8zT}",
    "your-Xk9mP2qLr8zT",
    "test1234",
    "hunter2024",
    "sk-...Xk9mP2qLr8zTw4Vb",  # more than 8 visible characters
    "ghp_" + "ab" * 18,
    "Tr0ub4dor&3x",
    "supersecret",
]


@pytest.mark.parametrize("value", PLACEHOLDERS)
def test_placeholder_rule_accepts(value: str) -> None:
    assert is_placeholder(value)
    for text in (f'{PASSWORD}: "{value}"', f"API_TOKEN={value}"):
        assert [f for f in scan(text) if f.kind == "assignment"] == [], text


@pytest.mark.parametrize("value", NOT_PLACEHOLDERS)
def test_placeholder_rule_rejects(value: str) -> None:
    assert not is_placeholder(value)


@pytest.mark.parametrize(
    "value", ["changeme" + "Xk9mP2qLr8zT", "<Xk9mP2qLr8zT>", "your-Xk9mP2qLr8zT", "sk-...Xk9mP2qLr8zTw4Vb"]
)
def test_a_placeholder_word_or_wrapper_does_not_smuggle_a_secret(value: str) -> None:
    text = f'{PASSWORD}: "{value}"'
    assert [(f.kind, text[f.start : f.end]) for f in scan(text)] == [("assignment", value)]
    if "<" in value:
        return  # not a URL
    text = f"postgres://app:{value}@db:5432/app"
    assert [(f.kind, text[f.start : f.end]) for f in scan(text)] == [("url-credentials", value)]


keyish = st.text(ALNUM, min_size=10, max_size=40).filter(
    lambda s: sum(c.isdigit() for c in s) >= 2 and sum(c.isalpha() for c in s) >= 2
)


@settings(max_examples=200, deadline=None)
@given(keyish, st.sampled_from(["<{}>", "[{}]", "{{{}}}", "${{X:-{}}}", "changeme{}", "{}-example", "your-{}"]))
def test_no_placeholder_form_hides_key_material(secret: str, form: str) -> None:
    assert not is_placeholder(form.format(secret))


# ---- not credentials: code, references, descriptions and prose -----------------------------------

NEGATIVES = [
    f"{PASSWORD} = getpass()",
    f"{PASSWORD} = getpass.getpass('Password: ')",
    'token = os.environ["TOKEN"]',
    "token = os.environ.get('GITHUB_TOKEN')",
    f"{PASSWORD}: str",
    f"{PASSWORD}: Optional[str] = None",
    f"def check_{PASSWORD}({PASSWORD}):",
    "api_key=None",
    "api_key = api_key",
    "token=request.token",
    "token = request.headers['X-Token']",
    "const token = localStorage.getItem('token');",
    f"const {PASSWORD} = req.body.{PASSWORD};",
    f"{PASSWORD}: process.env.DB_{PASSWORD.upper()},",
    "apiKey: config.apiKey,",
    f"self.{PASSWORD} = {PASSWORD}",
    f"{PASSWORD} = self._{PASSWORD}",
    "secret_key = settings.SECRET_KEY",
    "token = tokens[0]",
    "token = Token{}",
    f"{PASSWORD}_hash = bcrypt.hashpw(pw, salt)",
    f"{PASSWORD} = {PASSWORD}.strip()",
    "token = jwt.encode(payload, key)",
    "token = hashlib.sha256(data).hexdigest()",
    "token_bytes = secrets.token_bytes(32)",
    "api_key = api_key_v2",
    'token = "Bearer " + access_token',
    "secret = 'a' * 32",
    'api_key = f"{prefix}_{suffix}"',
    f"{PASSWORD} = '%s' % pw",
    "if token == expected_token:",
    "token = None if cached else fetch()",
    "auth: oauth2",
    "the token is expired",
    "the token: expired, ask for a new one",
    f"{PASSWORD.title()}: incorrect, try again",
    f"{PASSWORD}: required",
    f"{PASSWORD}: hunter2",  # below 8 characters: a documented limit
    "credentials: !vault |",
    "TOKEN=GITHUB_TOKEN",
    "API_TOKEN=$(gh auth token)",
    'TOKEN="$(gh auth token)"',
    "token: ${{ secrets.GITHUB_TOKEN }}",
    f"DB_{PASSWORD.upper()}=postgres",
    "--token <token>",
    f"--{PASSWORD} {PASSWORD.upper()}",
    f"docker login --{PASSWORD}-stdin",
    # keys that describe a credential rather than hold one
    "TOKEN_LENGTH=32",
    "max_tokens=4096",
    "token_type: bearer",
    f"{PASSWORD}_min_length: 12",
    "TOKEN_URL=https://auth.example.com/oauth/token",
    f"{PASSWORD.upper()}_FILE=/run/secrets/db",
    "secretName: app-tls-cert-production",
    "secret_arn: arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db-AbCdEf",
    "token_expires_at: 2024-01-01T10:00:00Z",
    "token_expiry=86400000",
    "next_page_token: CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA0",
    "AUTH_TYPE=bearer",
    "TOKEN_AUDIENCE=kubernetes",
    "private_key: /home/me/.ssh/id_ed25519",
    f"{PASSWORD}_command = pass show db",
    "AWS_ACCESS_KEY_ID_PARAM=aws-access-key-id",
    '"access_token": "access_token"',
    "tokenizer = AutoTokenizer.from_pretrained('bert-base-uncased')",
]


@pytest.mark.parametrize("text", NEGATIVES)
def test_references_and_descriptions_are_not_secrets(text: str) -> None:
    assert scan(text) == []


# ---- redaction keeps the structure around the value ----------------------------------------------


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (f"machine h login me {PASSWORD} Tr0ub4dor3x", f"machine h login me {PASSWORD} [REDACTED:netrc-password]"),
        (
            f"machine h\n  login me\n  {PASSWORD} Tr0ub4dor3x\n",
            f"machine h\n  login me\n  {PASSWORD} [REDACTED:netrc-password]\n",
        ),
        ("DB_" + PASSWORD.upper() + "=Tr0ub4dor3x.", "DB_" + PASSWORD.upper() + "=[REDACTED:assignment]."),
        ('{"api_key": "' + uuid(4) + '"}', '{"api_key": "[REDACTED:assignment]"}'),
        (f"<{PASSWORD}>k8s-Pw42</{PASSWORD}>", f"<{PASSWORD}>[REDACTED:assignment]</{PASSWORD}>"),
        ("curl -u deploy:k8s-Pw42 https://x", "curl -u deploy:[REDACTED:assignment] https://x"),
        ("--token x9Lq2mZt --verbose", "--token [REDACTED:assignment] --verbose"),
    ],
)
def test_redaction_replaces_only_the_value(text: str, redacted: str) -> None:
    out, found = redact(text)
    assert out == redacted
    assert len(found) == 1
    assert scan(out) == []
