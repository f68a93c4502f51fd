"""Tests for agentmsg.text.secrets.

Every secret-shaped value is assembled at run time from fragments and
seeded random characters, so no real-looking credential sits in the repo
as a single literal (and repo secret scanners stay quiet).
"""

from __future__ import annotations

import base64
import json
import random
import string
import time
from itertools import pairwise
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmsg.text.secrets import RULES, Finding, redact, scan

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"
BEGIN, END = "-----" + "BEGIN", "-----" + "END"


def rnd(alphabet: str, n: int, seed: int) -> str:
    r = random.Random(seed)
    return "".join(r.choice(alphabet) for _ in range(n))


def b64url(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def pem(label: str, seed: int, lines: int = 4) -> str:
    body = "\n".join(rnd(B64, 64, seed + i) for i in range(lines))
    return f"{BEGIN} {label} KEY-----\n{body}\n{END} {label} KEY-----"


def jwt(seed: int, header: dict[str, object] | None = None) -> str:
    head = b64url(header or {"alg": "HS256", "typ": "JWT"})
    payload = b64url({"sub": rnd(ALNUM, 10, seed), "iat": 1700000000 + seed})
    return f"{head}.{payload}.{rnd(B64URL, 43, seed)}"


def aws(seed: int, prefix: str = "AKIA") -> str:
    return prefix + rnd(UPPER_DIGITS, 16, seed)


def gh(prefix: str, seed: int) -> str:
    return prefix + "_" + rnd(ALNUM, 36, seed)


def slack_webhook(seed: int) -> str:
    path = f"T{rnd(UPPER_DIGITS, 8, seed)}/B{rnd(UPPER_DIGITS, 10, seed + 1)}/{rnd(ALNUM, 24, seed + 2)}"
    return "https://hooks." + "slack.com/services/" + path


def sk(seed: int, middle: str = "", n: int = 48, alphabet: str = ALNUM) -> str:
    return "sk-" + middle + rnd(alphabet, n, seed)


def value(seed: int, n: int = 20) -> str:
    return rnd(ALNUM + "!@#%^*+=", n, seed)


def b64_bytes(n: int, seed: int) -> str:
    return base64.b64encode(random.Random(seed).randbytes(n)).decode()


def stripe(kind: str, seed: int, n: int = 24) -> str:
    return kind + "_" + rnd(ALNUM, n, seed)  # kind: "sk_live", "rk_test", ...


def webhook_secret(seed: int) -> str:
    return "wh" + "sec_" + rnd(ALNUM, 32, seed)


def npm(seed: int) -> str:
    return "np" + "m_" + rnd(ALNUM, 36, seed)


def pypi(seed: int) -> str:
    return "py" + "pi-AgEIcHlwaS5vcmc" + rnd(B64URL, 120, seed)


def hf(seed: int) -> str:
    return "h" + "f_" + rnd(string.ascii_letters, 34, seed)


def sendgrid(seed: int) -> str:
    return "S" + "G." + rnd(B64URL, 22, seed) + "." + rnd(B64URL, 43, seed + 1)


def xapp(seed: int) -> str:
    return f"xa{'pp'}-1-A{rnd(UPPER_DIGITS, 10, seed)}-{rnd(string.digits, 13, seed + 1)}-{rnd(HEX, 64, seed + 2)}"


def ya29(seed: int) -> str:
    return "ya" + "29." + rnd(B64URL, 150, seed)


def gocspx(seed: int) -> str:
    return "GOC" + "SPX-" + rnd(B64URL, 28, seed)


def do_token(kind: str, seed: int) -> str:
    return kind + "_v1_" + rnd(HEX, 64, seed)  # kind: "dop", "doo", "dor"


def shopify(kind: str, seed: int) -> str:
    return kind + "_" + rnd(HEX, 32, seed)  # kind: "shpat", "shpca", "shppa", "shpss"


def azure_key(seed: int) -> str:
    return b64_bytes(64, seed)


def sas_sig(seed: int, encoded: bool = True) -> str:
    sig = b64_bytes(32, seed)
    return quote(sig, safe="") if encoded else sig


def discord_webhook(seed: int) -> str:
    return "https://discord.com/api/" + "webhooks/" + rnd(string.digits, 18, seed) + "/" + rnd(B64URL, 68, seed + 1)


def telegram(seed: int) -> str:
    return rnd(string.digits, 10, seed) + ":AA" + rnd(B64URL, 33, seed + 1)


def twilio_sid(prefix: str, seed: int) -> str:
    return prefix + rnd(HEX, 32, seed)  # prefix: "SK" (API key SID) or "AC" (account SID)


def databricks(seed: int) -> str:
    return "da" + "pi" + rnd(HEX, 32, seed)


def vault(prefix: str, seed: int, n: int = 91) -> str:
    return prefix + "." + rnd(ALNUM + "_-", n, seed)  # prefix: "hvs", "hvb", "hvr"


def vault_legacy(seed: int) -> str:
    return "s." + rnd(ALNUM, 24, seed)


BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l".upper()

#: New vendor kinds: kind -> (make a token from a seed, a context to put it in).
VENDOR: dict[str, tuple[object, str]] = {
    "databricks-token": (lambda n: databricks(n), "DATABRICKS_TOKEN={}"),
    "terraform-token": (lambda n: rnd(ALNUM, 14, n) + ".atlas" + "v1." + rnd(B64URL, 67, n + 1), "token = \"{}\""),
    "atlassian-api-token": (lambda n: "ATA" + "TT3xFfGF0" + rnd(B64URL, 170, n) + "=" + rnd(HEX, 8, n + 1),
                            "JIRA_API_TOKEN={}"),
    "grafana-token": (lambda n: "gl" + "sa_" + rnd(ALNUM, 32, n) + "_" + rnd(HEX, 8, n + 1), "Bearer {}"),
    "sentry-token": (lambda n: "sntr" + "yu_" + rnd(HEX, 64, n), "SENTRY_AUTH_TOKEN={}"),
    "age-secret-key": (lambda n: "AGE-SECRET-" + "KEY-1" + rnd(BECH32, 58, n), "# created: 2026-01-01\n{}"),
    "postman-api-key": (lambda n: "PM" + "AK-" + rnd(HEX, 24, n) + "-" + rnd(HEX, 34, n + 1), "x-api-key: {}"),
    "doppler-token": (lambda n: "dp." + "pt." + rnd(ALNUM, 43, n), "DOPPLER_TOKEN='{}'"),
    "planetscale-token": (lambda n: "pscale" + "_tkn_" + rnd(ALNUM, 43, n), "{}"),
    "pulumi-token": (lambda n: "pu" + "l-" + rnd(HEX, 40, n), "PULUMI_ACCESS_TOKEN={}"),
    "linear-api-key": (lambda n: "lin" + "_api_" + rnd(ALNUM, 40, n), "Authorization: {}"),
    "supabase-token": (lambda n: "sb" + "p_" + rnd(HEX, 40, n), "supabase login --token {}"),
    "docker-hub-token": (lambda n: "dckr" + "_pat_" + rnd(B64URL, 27, n), "echo {} | docker login --password-stdin"),
    "rubygems-token": (lambda n: "rubygems" + "_" + rnd(HEX, 48, n), ":rubygems_api_key: {}"),
    "new-relic-key": (lambda n: "NR" + "AK-" + rnd(UPPER_DIGITS, 27, n), "NEW_RELIC_API_KEY={}"),
    "tailscale-key": (lambda n: "tskey" + "-auth-" + rnd(ALNUM, 12, n) + "-" + rnd(ALNUM, 33, n + 1),
                      "up --authkey={}"),
    "langsmith-api-key": (lambda n: "lsv2" + "_pt_" + rnd(HEX, 32, n) + "_" + rnd(HEX, 10, n + 1), "{}"),
    "groq-api-key": (lambda n: "gs" + "k_" + rnd(ALNUM, 52, n), "GROQ_API_KEY={}"),
    "replicate-token": (lambda n: "r8" + "_" + rnd(ALNUM, 37, n), "REPLICATE_API_TOKEN={}"),
    "perplexity-api-key": (lambda n: "pp" + "lx-" + rnd(ALNUM, 48, n), "{}"),
    "xai-api-key": (lambda n: "xa" + "i-" + rnd(ALNUM, 80, n), "XAI_API_KEY={}"),
    "square-token": (lambda n: "sq0" + "atp-" + rnd(B64URL, 22, n), "access: {}"),
    "brevo-api-key": (lambda n: "xkey" + "sib-" + rnd(HEX, 64, n) + "-" + rnd(ALNUM, 16, n + 1), "api-key: {}"),
    "dynatrace-token": (lambda n: "dt0" + "c01." + rnd(UPPER_DIGITS, 24, n) + "." + rnd(UPPER_DIGITS, 64, n + 1),
                        "Api-Token {}"),
    "notion-token": (lambda n: "nt" + "n_" + rnd(ALNUM, 46, n), "NOTION_TOKEN={}"),
}


def vendor(kind: str, seed: int) -> str:
    make = VENDOR[kind][0]
    assert callable(make)
    token = make(seed)
    assert isinstance(token, str)
    return token


def vendor_case(kind: str, seed: int) -> tuple[str, str, str, int]:
    context = VENDOR[kind][1]
    return kind, context.format(vendor(kind, seed)), vendor(kind, seed), 1 + context.count("\n")


PASSWORD = "pass" + "word"

# (kind, text, the exact secret span, expected 1-based line)
CASES: list[tuple[str, str, str, int]] = [
    ("aws-access-key", f"AWS_ACCESS_KEY_ID={aws(1)}", aws(1), 1),
    ("aws-access-key", f"first\n  key: {aws(2, 'ASIA')}\n", aws(2, "ASIA"), 2),
    ("aws-access-key", f"creds `{aws(3)}` leaked", aws(3), 1),
    ("gcp-api-key", f"GOOGLE_API_KEY=AIza{rnd(B64URL, 35, 4)}", f"AIza{rnd(B64URL, 35, 4)}", 1),
    ("gcp-api-key", f"\n\nfetch('/maps?key=AIza{rnd(ALNUM, 35, 5)}&q=1')", f"AIza{rnd(ALNUM, 35, 5)}", 3),
    ("github-token", f"export GITHUB_TOKEN={gh('ghp', 6)}", gh("ghp", 6), 1),
    ("github-token", f"a\nb\n{gh('gho', 7)}", gh("gho", 7), 3),
    ("github-token", f"token '{gh('ghu', 8)}'", gh("ghu", 8), 1),
    ("github-token", f"x {gh('ghs', 9)} y", gh("ghs", 9), 1),
    ("github-token", f"x\n{gh('ghr', 10)}", gh("ghr", 10), 2),
    (
        "github-token",
        f"pat: github_pat_{rnd(ALNUM, 22, 11)}_{rnd(ALNUM, 59, 12)}",
        f"github_pat_{rnd(ALNUM, 22, 11)}_{rnd(ALNUM, 59, 12)}",
        1,
    ),
    ("gitlab-token", f"CI_TOKEN=glpat-{rnd(B64URL, 20, 13)}", f"glpat-{rnd(B64URL, 20, 13)}", 1),
    ("gitlab-token", f"\n glpat-{rnd(ALNUM, 26, 14)} ", f"glpat-{rnd(ALNUM, 26, 14)}", 2),
    (
        "slack-token",
        f"bot: xoxb-{rnd('0123456789', 12, 15)}-{rnd('0123456789', 13, 16)}-{rnd(ALNUM, 24, 17)}",
        f"xoxb-{rnd('0123456789', 12, 15)}-{rnd('0123456789', 13, 16)}-{rnd(ALNUM, 24, 17)}",
        1,
    ),
    (
        "slack-token",
        f"\nxoxp-{rnd('0123456789', 11, 18)}-{rnd('0123456789', 11, 19)}-{rnd(HEX, 32, 20)}",
        f"xoxp-{rnd('0123456789', 11, 18)}-{rnd('0123456789', 11, 19)}-{rnd(HEX, 32, 20)}",
        2,
    ),
    ("slack-token", f"xoxa-2-{rnd(ALNUM, 30, 21)}", f"xoxa-2-{rnd(ALNUM, 30, 21)}", 1),
    ("slack-token", f"r=xoxr-1-{rnd(ALNUM, 30, 22)}", f"xoxr-1-{rnd(ALNUM, 30, 22)}", 1),
    ("slack-token", f"s xoxs-9-{rnd(ALNUM, 30, 23)}", f"xoxs-9-{rnd(ALNUM, 30, 23)}", 1),
    ("slack-token", f"post to {slack_webhook(24)} now", slack_webhook(24), 1),
    ("openai-api-key", f"OPENAI_API_KEY={sk(25)}", sk(25), 1),
    ("openai-api-key", f"\n\n\nkey: {sk(26, 'proj-', 120, B64URL)}", sk(26, "proj-", 120, B64URL), 4),
    ("openai-api-key", f'"{sk(27, "svcacct-", 60)}"', sk(27, "svcacct-", 60), 1),
    (
        "anthropic-api-key",
        f"ANTHROPIC_API_KEY={sk(28, 'ant-api03-', 93, B64URL)}AA",
        sk(28, "ant-api03-", 93, B64URL) + "AA",
        1,
    ),
    ("anthropic-api-key", f"\n{sk(29, 'ant-admin01-', 80)}", sk(29, "ant-admin01-", 80), 2),
    ("anthropic-api-key", f"use `{sk(30, 'ant-', 40)}`", sk(30, "ant-", 40), 1),
    ("private-key", f"key:\n{pem('RSA PRIVATE', 31)}\nthanks", pem("RSA PRIVATE", 31), 2),
    ("private-key", pem("EC PRIVATE", 35), pem("EC PRIVATE", 35), 1),
    ("private-key", f"a\nb\n{pem('OPENSSH PRIVATE', 40)}", pem("OPENSSH PRIVATE", 40), 3),
    ("private-key", pem("PRIVATE", 45), pem("PRIVATE", 45), 1),
    ("private-key", pem("ENCRYPTED PRIVATE", 50), pem("ENCRYPTED PRIVATE", 50), 1),
    (
        "private-key",
        f"\n{pem('PGP PRIVATE', 55).replace(' KEY-----', ' KEY BLOCK-----')}",
        pem("PGP PRIVATE", 55).replace(" KEY-----", " KEY BLOCK-----"),
        2,
    ),
    (
        "private-key",
        '{"private_key": "' + pem("PRIVATE", 60).replace("\n", "\\n") + '\\n"}',
        pem("PRIVATE", 60).replace("\n", "\\n"),
        1,
    ),
    ("jwt", f"Authorization: Bearer {jwt(61)}", jwt(61), 1),
    ("jwt", f"\ncookie={jwt(62, {'alg': 'RS256', 'kid': 'k1'})}; Path=/", jwt(62, {"alg": "RS256", "kid": "k1"}), 2),
    ("jwt", f"token: {jwt(63)}", jwt(63), 1),
    ("assignment", f'{PASSWORD} = "{value(64)}"', value(64), 1),
    ("assignment", f'{{\n  "api_key": "{value(65)}"\n}}', value(65), 2),
    ("assignment", f"DB_{PASSWORD.upper()}={rnd(ALNUM, 24, 66)}", rnd(ALNUM, 24, 66), 1),
    ("assignment", f"x\nclient_secret: '{value(67, 32)}'", value(67, 32), 2),
    ("assignment", f"Authorization: Bearer {rnd(ALNUM, 40, 68)}", rnd(ALNUM, 40, 68), 1),
    ("assignment", f"passwd: {rnd(ALNUM, 16, 69)}", rnd(ALNUM, 16, 69), 1),
    ("assignment", f"accessToken := {rnd(HEX, 40, 70)}", rnd(HEX, 40, 70), 1),
    ("assignment", f"curl 'https://api.example.com/v1?access_token={rnd(ALNUM, 32, 71)}'", rnd(ALNUM, 32, 71), 1),
    ("url-credentials", f"DATABASE_URL=postgres://app:{rnd(ALNUM, 16, 72)}@db:5432/app", rnd(ALNUM, 16, 72), 1),
    (
        "url-credentials",
        f"\ngit clone https://deploy:{rnd(ALNUM, 12, 73)}@git.example.com/r.git",
        rnd(ALNUM, 12, 73),
        2,
    ),
    # ---- Stripe: secret (sk_) and restricted (rk_) keys, live and test; webhook signing secrets
    ("stripe-key", f"STRIPE_SECRET_KEY={stripe('sk_live', 400)}", stripe("sk_live", 400), 1),
    ("stripe-key", f'stripe.api_key = "{stripe("rk_live", 401, 99)}"', stripe("rk_live", 401, 99), 1),
    ("stripe-key", f'{{\n  "key": "{stripe("sk_test", 402)}"\n}}', stripe("sk_test", 402), 2),
    ("stripe-key", f"curl https://api.stripe.com/v1/charges -u {stripe('rk_test', 403)}:", stripe("rk_test", 403), 1),
    ("stripe-webhook-secret", f"endpoint_secret: {webhook_secret(404)}", webhook_secret(404), 1),
    ("stripe-webhook-secret", f'\n{{"signing": "{webhook_secret(405)}"}}', webhook_secret(405), 2),
    # ---- package registries
    ("npm-token", f"//registry.npmjs.org/:_authToken={npm(406)}", npm(406), 1),
    ("npm-token", f'NPM_TOKEN="{npm(407)}"\n', npm(407), 1),
    ("npm-token", f"publish with ({npm(408)}).", npm(408), 1),
    ("pypi-token", f"[pypi]\nusername = __token__\n{PASSWORD} = {pypi(409)}\n", pypi(409), 3),
    ("pypi-token", f"TWINE_{PASSWORD.upper()}='{pypi(410)}'", pypi(410), 1),
    ("huggingface-token", f"HF_TOKEN={hf(411)}", hf(411), 1),
    ("huggingface-token", f"huggingface-cli login --token {hf(412)}", hf(412), 1),
    ("huggingface-token", f'tokens = ["{hf(413)}",]', hf(413), 1),
    ("sendgrid-key", f"SENDGRID_API_KEY='{sendgrid(414)}'", sendgrid(414), 1),
    ("sendgrid-key", f"\n-H 'Authorization: Bearer {sendgrid(416)}'", sendgrid(416), 2),
    # ---- Slack: app-level tokens, every xox form, webhooks with or without a scheme
    ("slack-token", f"SLACK_APP_TOKEN={xapp(418)}", xapp(418), 1),
    ("slack-token", f"refresh: xoxe.xoxp-1-{rnd(ALNUM, 40, 421)}", f"xoxe.xoxp-1-{rnd(ALNUM, 40, 421)}", 1),
    ("slack-token", f"xoxe-1-{rnd(ALNUM, 40, 422)}", f"xoxe-1-{rnd(ALNUM, 40, 422)}", 1),
    (
        "slack-token",
        f"legacy xoxo-{rnd('0123456789', 10, 423)}-{rnd(ALNUM, 24, 424)}",
        f"xoxo-{rnd('0123456789', 10, 423)}-{rnd(ALNUM, 24, 424)}",
        1,
    ),
    ("slack-token", f'"xoxb-{rnd(ALNUM, 40, 425)}"', f"xoxb-{rnd(ALNUM, 40, 425)}", 1),
    (
        "slack-token",
        f"xoxc-{rnd('0123456789', 12, 426)}-{rnd(ALNUM, 30, 427)}",
        f"xoxc-{rnd('0123456789', 12, 426)}-{rnd(ALNUM, 30, 427)}",
        1,
    ),
    (
        "slack-token",
        f"url: {slack_webhook(428).removeprefix('https://')}",
        slack_webhook(428).removeprefix("https://"),
        1,
    ),
    (
        "slack-token",
        f"notify: curl -X POST -H 'Content-type: application/json' --data '{{\"text\":\"done\"}}' {slack_webhook(429)}",
        slack_webhook(429),
        1,
    ),
    ("slack-token", f'{{"webhook_url": "{slack_webhook(430)}"}}', slack_webhook(430), 1),
    # ---- Google OAuth
    ("google-oauth-token", f"Authorization: Bearer {ya29(431)}", ya29(431), 1),
    ("google-oauth-token", f'{{\n"access_token": "{ya29(432)}",\n"expires_in": 3599}}', ya29(432), 2),
    (
        "google-client-secret",
        f'{{"installed": {{"client_id": "x", "client_secret": "{gocspx(433)}"}}}}',
        gocspx(433),
        1,
    ),
    ("google-client-secret", f"GOOGLE_CLIENT_SECRET={gocspx(434)}", gocspx(434), 1),
    # ---- Azure
    (
        "azure-storage-key",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="
        + azure_key(435)
        + ";EndpointSuffix=core.windows.net",
        azure_key(435),
        1,
    ),
    (
        "azure-storage-key",
        "\nEndpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey="
        + b64_bytes(32, 436),
        b64_bytes(32, 436),
        2,
    ),
    (
        "azure-sas-token",
        f"https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2030-01-01T00:00:00Z&sig={sas_sig(437)}",
        sas_sig(437),
        1,
    ),
    (
        "azure-sas-token",
        f"BlobEndpoint=https://a.blob.core.windows.net/;SharedAccessSignature=sv=2022-11-02"
        f"&sig={sas_sig(438, False)}&se=x",
        sas_sig(438, False),
        1,
    ),
    # ---- DigitalOcean and Shopify
    ("digitalocean-token", f"DIGITALOCEAN_TOKEN={do_token('dop', 439)}", do_token("dop", 439), 1),
    ("digitalocean-token", f"oauth: {do_token('doo', 440)}\n", do_token("doo", 440), 1),
    ("digitalocean-token", f'\n{{"refresh": "{do_token("dor", 441)}"}}', do_token("dor", 441), 2),
    ("shopify-token", f"X-Shopify-Access-Token: {shopify('shpat', 442)}", shopify("shpat", 442), 1),
    ("shopify-token", f"'{shopify('shpca', 443)}'", shopify("shpca", 443), 1),
    ("shopify-token", f"app: {shopify('shppa', 444)};", shopify("shppa", 444), 1),
    ("shopify-token", f"SHOPIFY_SECRET={shopify('shpss', 445)}", shopify("shpss", 445), 1),
    # ---- chat webhooks and bots often found in notify commands
    ("discord-webhook", f"curl -d '{{}}' {discord_webhook(446)}", discord_webhook(446)[len("https://") :], 1),
    ("telegram-bot-token", f"curl https://api.telegram.org/bot{telegram(447)}/sendMessage", telegram(447), 1),
    ("telegram-bot-token", f"TELEGRAM_BOT_TOKEN={telegram(448)}", telegram(448), 1),
    # ---- .netrc: one line, across lines, default entries
    ("netrc-password", f"machine api.example.com login me {PASSWORD} {rnd(ALNUM, 12, 449)}", rnd(ALNUM, 12, 449), 1),
    (
        "netrc-password",
        f"machine git.example.com\n  login me\n  {PASSWORD} {rnd(ALNUM, 12, 450)}\n",
        rnd(ALNUM, 12, 450),
        3,
    ),
    ("netrc-password", f"machine h {PASSWORD} {rnd(ALNUM, 10, 451)} login me", rnd(ALNUM, 10, 451), 1),
    ("netrc-password", f"default login anonymous {PASSWORD} {rnd(ALNUM, 10, 452)}", rnd(ALNUM, 10, 452), 1),
    ("netrc-password", f"machine h login u account a port 21 {PASSWORD} {rnd(ALNUM, 10, 453)}", rnd(ALNUM, 10, 453), 1),
    # ---- issue 29: Twilio key SIDs next to a secret, Databricks, Vault, and more current vendor formats
    ("twilio-api-key", f"key {twilio_sid('SK', 500)} secret {rnd(ALNUM, 32, 501)}", rnd(ALNUM, 32, 501), 1),
    ("twilio-api-key", f"curl -X POST api.twilio.com -d x {twilio_sid('SK', 502)}:{rnd(ALNUM, 32, 503)}",
     rnd(ALNUM, 32, 503), 1),
    ("twilio-api-key", f'{{"sid": "{twilio_sid("AC", 504)}",\n "auth": "{rnd(HEX, 32, 505)}"}}', rnd(HEX, 32, 505), 2),
    ("databricks-token", f"export DATABRICKS_TOKEN={databricks(506)}", databricks(506), 1),
    ("databricks-token", f"\nhost=x token {databricks(507)}-2 ok", databricks(507) + "-2", 2),
    ("vault-token", f"VAULT_TOKEN={vault('hvs', 508)}", vault("hvs", 508), 1),
    ("vault-token", f"batch: {vault('hvb', 509, 138)}", vault("hvb", 509, 138), 1),
    ("vault-token", f"vault login {vault_legacy(510)}", vault_legacy(510), 1),
    ("gitlab-token", f"trigger: glptt-{rnd(HEX, 40, 511)}", f"glptt-{rnd(HEX, 40, 511)}", 1),
    ("gitlab-token", f"runner token glrt-{rnd(B64URL, 20, 512)}", f"glrt-{rnd(B64URL, 20, 512)}", 1),
    ("gitlab-token", f"register GR1348941{rnd(B64URL, 20, 513)}", f"GR1348941{rnd(B64URL, 20, 513)}", 1),
    ("grafana-token", f"GRAFANA=glc_{rnd(B64, 80, 514)}", f"glc_{rnd(B64, 80, 514)}", 1),
    ("supabase-token", f"SUPABASE_SECRET=sb_secret_{rnd(B64URL, 31, 515)}", f"sb_secret_{rnd(B64URL, 31, 515)}", 1),
    ("notion-token", f"notion = '{'secret'}_{rnd(ALNUM, 43, 516)}'", f"secret_{rnd(ALNUM, 43, 516)}", 1),
    *(vendor_case(kind, 520 + 2 * i) for i, kind in enumerate(VENDOR)),
]


@pytest.mark.parametrize(("kind", "text", "secret", "line"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_kind_detected(kind: str, text: str, secret: str, line: int) -> None:
    found = scan(text)
    assert [(f.kind, f.line) for f in found] == [(kind, line)]
    assert text[found[0].start : found[0].end] == secret


def test_every_kind_has_a_case() -> None:
    assert {rule.kind for rule in RULES} == {case[0] for case in CASES}


def test_redact_exact() -> None:
    token, pw = gh("ghp", 100), value(101)
    text = f'line one\nexport GITHUB_TOKEN={token}\n{PASSWORD}: "{pw}"\nbye'
    out, found = redact(text)
    assert out == 'line one\nexport GITHUB_TOKEN=[REDACTED:github-token]\npassword: "[REDACTED:assignment]"\nbye'
    assert [(f.kind, f.line) for f in found] == [("github-token", 2), ("assignment", 3)]


def test_redact_keeps_key_names_and_url_shape() -> None:
    pw = rnd(ALNUM, 14, 102)
    out, _ = redact(f"api_key={rnd(ALNUM, 30, 103)} url=https://u:{pw}@h/p")
    assert out == "api_key=[REDACTED:assignment] url=https://u:[REDACTED:url-credentials]@h/p"


def test_redact_private_key_block() -> None:
    out, found = redact(f"before\n{pem('RSA PRIVATE', 104)}\nafter")
    assert out == "before\n[REDACTED:private-key]\nafter"
    assert found == [Finding("private-key", 2, 7, 7 + len(pem("RSA PRIVATE", 104)))]


def test_redact_clean_text_unchanged() -> None:
    assert redact("nothing to see\n") == ("nothing to see\n", [])


def test_multiple_kinds_sorted_by_position() -> None:
    text = f"{jwt(105)}\n{aws(106)} and {sk(107)}\n\n{PASSWORD}={value(108)}"
    found = scan(text)
    assert [(f.kind, f.line) for f in found] == [
        ("jwt", 1),
        ("aws-access-key", 2),
        ("openai-api-key", 2),
        ("assignment", 4),
    ]
    assert all(a.end <= b.start for a, b in pairwise(found))


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (sk(109, "ant-api03-", 90), "anthropic-api-key"),  # never reported as openai
        (f"token = {jwt(110)}", "jwt"),  # the specific kind, not the assignment
        (f'{PASSWORD}: "{aws(111)}"', "aws-access-key"),
        (f"SLACK_TOKEN=xoxb-1-{rnd(ALNUM, 30, 112)}", "slack-token"),
    ],
)
def test_specific_kind_wins_over_general(text: str, kind: str) -> None:
    assert [f.kind for f in scan(text)] == [kind]


def test_overlap_merges_into_the_more_specific_kind() -> None:
    token = gh("ghp", 113)
    text = f"token=abcdefghijk9.{token}"  # the assignment value swallows the token
    out, found = redact(text)
    assert [f.kind for f in found] == ["github-token"]
    assert out == "token=[REDACTED:github-token]"


def test_value_next_to_a_secret_merges_into_the_specific_kind() -> None:
    # The assigned value runs into an AWS key: one finding, named by the more specific kind.
    key = "AKIA" + "A00000" + rnd(UPPER_DIGITS, 10, 114)
    text = f"token=Ab1!Cd2@Ef3#.{key} rest"
    out, found = redact(text)
    assert [(f.kind, f.start, f.end) for f in found] == [("aws-access-key", 6, 39)]
    assert out == "token=[REDACTED:aws-access-key] rest"


def test_value_rejected_only_because_of_its_neighbour_is_still_found() -> None:
    # "-u" right after the key's closing dashes is not a flag; once the key is
    # a marker it is, and scan reports the password it carries too.
    block, pw = pem("RSA PRIVATE", 115), rnd(ALNUM, 14, 114)
    text = f"{block}-u deploy:{pw}"
    out, found = redact(text)
    assert [(f.kind, text[f.start : f.end]) for f in found] == [("private-key", block), ("assignment", pw)]
    assert out == "[REDACTED:private-key]-u deploy:[REDACTED:assignment]"


def test_key_cannot_swallow_adjacent_private_key_dashes() -> None:
    key, block = sk(115), pem("RSA PRIVATE", 116)
    assert [f.kind for f in scan(f"{key}-{block}")] == ["openai-api-key", "private-key"]
    assert [f.kind for f in scan(f"PASSWD:0123456789=?@{block}")] == ["assignment", "private-key"]


IMAGE = "![diagram](data:image/png;base64," + rnd(B64, 4000, 200) + "==)"
FALSE_POSITIVES = [
    "request 550e8400-e29b-41d4-a716-446655440000 failed",
    '{"id": "550e8400-e29b-41d4-a716-446655440000", "session_id": "6ba7b810-9dad-11d1-80b4-00c04fd430c8"}',
    f"fixed in commit {rnd(HEX, 40, 201)}",
    f"git object {rnd(HEX, 64, 202)} (sha256 repo)",
    IMAGE,
    f"digest: sha256:{rnd(HEX, 64, 203)}",
    f"image@sha256:{rnd(HEX, 64, 204)}",
    "the token expired, please log in again",
    f"{PASSWORD}: see vault",
    f"Rotate the {PASSWORD}; the token: ask ops. Secret sauce is caching.",
    "password reset tokens are single-use",
    f'{PASSWORD} = "changeme"',
    'token: "<your-token>"',
    "API_KEY=${TOKEN}",
    f"{PASSWORD}: xxxxxxxxxxxxxxxx",
    'secret = "****************"',
    "OPENAI_API_KEY=sk-...",
    "AWS_ACCESS_KEY_ID=AKIA" + "IOSFODNN7" + "EXAMPLE",
    "token: $GITHUB_TOKEN",
    f'{PASSWORD}: "{{{{ db_password }}}}"',
    "Authorization: Bearer $TOKEN",
    'db_password: "{{.Values.database.password}}"',
    "token: <paste-your-gitlab-token-here>",
    'api_key = "your-api-key-goes-here"',
    "https://github.com/org/repo/blob/main/agentmsg/secret_scan.py#L10",
    "https://example.com:8443/path?q=1&page=2",
    "git@github.com:org/repo.git",
    "postgres://postgres:postgres@localhost:5432/dev",
    "https://user:pass@example.com/",
    f'"integrity": "sha512-{rnd(B64, 86, 205)}=="',
    f'EXPECTED = "{rnd(HEX, 64, 206)}"',
    f"blob = b'{rnd(B64, 200, 207)}'",
    f"assert h.hexdigest() == '{rnd(HEX, 64, 208)}'",
    "the task-sk-review step and sk-learn",
    "v1.2.3-rc.1+build.20240101, python 3.11.7, node v20.11.0",
    "password_reset_token_ttl: 3600",
    "max_tokens=4096",
    "tokenizer = AutoTokenizer.from_pretrained('gpt2')",
    f"{PASSWORD} = os.environ['DB_PASSWORD']",
    "token = request.headers.get('X-Token')",
    "SECRET_KEY = settings.DJANGO_SECRET_KEY",
    "secretName: app-tls-cert-production",
    "private_key: /home/me/.ssh/id_ed25519",
    "token_url: https://auth.example.com/oauth2/v1/token",
    f"look for {BEGIN} RSA PRIVATE KEY----- headers in the repo",
    "xoxb-your-token-here",
    "https://hooks." + "slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "ghp_" + "X" * 36,
    "eyJhbGciOiJIUzI1NiJ9 is just a header",
    f"eyJ{rnd(ALNUM, 20, 209)}.{rnd(ALNUM, 20, 210)}.{rnd(ALNUM, 20, 211)}",  # header is not JSON
    "",
    # new kinds: publishable keys, near misses and filler
    "pk_live_" + rnd(ALNUM, 24, 212),  # Stripe publishable keys are meant to be public
    "pk_test_" + rnd(ALNUM, 24, 213),
    "sk_live_" + "x" * 24,
    "whsec_" + "X" * 32,
    "from huggingface_hub import hf_hub_download; hf_transfer enabled",
    "hf_" + "abcdefghijklmnopqrstuvwxyzabcdefghij",  # one case: an identifier, not a token
    "npm_config_registry=https://registry.npmjs.org/ npm_package_version=1.2.3",
    "npm_" + "0" * 36,
    "pypi-AgEIcHlwaS5vcmc...",
    "SG.foo.bar and SG.xxxxxxxxxxxxxxxxxxxxxx.yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy",
    "dop_v1_" + "0" * 64,
    "shpat_" + "0" * 32,
    "shpat_123 is too short",
    "ya29.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "client_secret: GOCSPX-<your-secret>",
    "AccountKey=<storage-account-key>;EndpointSuffix=core.windows.net",
    "AccountKey=" + "A" * 86 + "==",
    "https://x.blob.core.windows.net/c?sig=abc&sv=2022-11-02",
    "https://x.example/p?sig=" + rnd(ALNUM, 60, 214),  # not a 32-byte signature
    "xapp-1-XXXXXXXXXXX-0000000000000-xxxxxxxx",
    "https://hooks." + "slack.com/services/XXX/YYY/ZZZ",
    "https://discord.com/api/" + "webhooks/" + "0" * 18 + "/" + "x" * 68,
    "machine learning password is weak",
    "by default password authentication is off",
    f"machine api.example.com login me {PASSWORD} $NETRC_PASSWORD",
    f"machine h login u {PASSWORD} <secret>",
    "docker run -u 1000:1000 image; docker exec -u www-data:www-data c; git push -u origin main",
    "AWS_ACCESS_KEY_ID=AKIA"
    + "IOSFODNN7"
    + "EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/"
    + "bPxRfiCYEXAMPLEKEY",
]


@pytest.mark.parametrize("text", FALSE_POSITIVES, ids=range(len(FALSE_POSITIVES)))
def test_false_positives_not_flagged(text: str) -> None:
    assert scan(text) == []


# Fragments that make random text likely to contain secrets, near-secrets
# and redaction markers next to each other.
FRAGMENTS = [
    *(aws(300), gh("ghp", 301), sk(302), sk(303, "ant-", 40), jwt(304), pem("RSA PRIVATE", 305)),
    *(f"glpat-{rnd(ALNUM, 24, 306)}", f"xoxb-1-{rnd(ALNUM, 24, 307)}", f"AIza{rnd(ALNUM, 35, 308)}"),
    *(
        slack_webhook(309),
        value(310),
        rnd(ALNUM, 20, 311),
        f"{BEGIN} RSA PRIVATE KEY-----",
        f"{END} RSA PRIVATE KEY-----",
    ),
    *"AKIA sk- sk-ant- ghp_ eyJ glpat- xoxb-1- ----- ---- password token token] secret api_key = [ ] ( . - _".split(),
    *"@ u: https:// 0123456789 [REDACTED: [REDACTED:jwt] [REDACTED:github-token] [REDACTED:url-credentials]".split(),
    *(": ", '"', "'", "\n", "\\n", " ", "Bearer "),
    *(stripe("sk_live", 315), npm(316), pypi(317), hf(318), sendgrid(319), xapp(320), ya29(321), gocspx(322)),
    *(do_token("dop", 323), shopify("shpat", 324), discord_webhook(325), telegram(326), sas_sig(327)),
    *("AccountKey=" + azure_key(328), "&sig=", "machine h ", "default login u ", f"{PASSWORD} ", "-u u:", "--token "),
    *("<password>", "</password>", "DB_PASSWORD=", "changeme", "${X}", "<x>", "xxxx", rnd(HEX, 32, 329)),
    # issue 29: new kinds and one layer of encoding
    *("SK" + rnd(HEX, 32, 330), " secret ", rnd(ALNUM, 32, 331), databricks(332), vault("hvs", 333), "s.", "hvs."),
    *(base64.b64encode(pem("RSA PRIVATE", 334).encode()).decode(), quote(gh("ghp", 335), safe=""), "%3D", "%2F"),
    *(base64.b64encode(f"token={gh('ghp', 336)}".encode()).decode(), "%", "%0A", "%20", "==", "LS0tLS1CRUdJTi"),
]
texts = st.lists(st.one_of(st.text(max_size=30), st.sampled_from(FRAGMENTS)), max_size=14).map("".join)


@settings(max_examples=400, deadline=None)
@given(texts)
def test_redact_leaves_nothing_to_find(text: str) -> None:
    out, found = redact(text)
    assert all(0 <= f.start < f.end <= len(text) for f in found)
    assert all(a.end <= b.start for a, b in pairwise(found))
    assert [f.line for f in found] == [text.count("\n", 0, f.start) + 1 for f in found]
    assert scan(out) == []


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_scan_never_raises(text: str) -> None:
    assert isinstance(scan(text), list)


ADVERSARIAL = [
    "a" * 65536,
    "-----BEGIN " * 5000,
    "password=" * 8000,
    'token: "' * 8000,
    "sk-" + "a" * 65533,
    "AKIA" * 16384,
    "eyJaaaaaaaaaaa." * 4096,
    "https://u:" * 6500,
    (f"{BEGIN} PRIVATE KEY-----" + "a b " * 10) * 300,
    f"{BEGIN} PRIVATE KEY-----\n" + "A" * 65000,
    "xoxb-1-" * 9000,
    "=" * 65536,
    "\n" * 65536,
    "a=a" * 21000,
    "a-b" * 21000,
    "token:" * 10000,
    "token_url=" * 6500,
    "AccountKey=" * 6000,
    "&sig=" + "A" * 65000,
    "sig=" * 16000,
    "machine x " * 6500,
    "machine x password " * 3400,
    "default login " * 5000,
    "--password " * 6000,
    "<password>" * 6000,
    "<password>a</passwor" * 3000,
    '\\"token\\": \\"' * 5000,
    "npm_" + "A" * 65000 + "_",
    "hf_" + "aA" * 32000 + "-",
    "SG." + "a" * 64000,
    "SG.aaaaaaaaaaaaaaaaaaaa." * 2800,
    "xoxb-" + "a" * 65000,
    "ya29." * 13000,
    "123456789:" * 6500,
    "bot123456789:AA" * 4000,
    ("x" * 60 + "token=") * 990,
    "a." * 32000,
    "-u " * 20000,
    "-u a:" * 13000,
    'password="' + "a" * 65000,
    "secret='" + "\\" * 65000,
    "password: <" + "a1" * 32000 + ">",
    "token=" + "${" * 32000,
    "api_key=" + "Ab1." * 16000,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_adversarial_inputs_complete(text: str) -> None:
    # A generous bound: linear patterns take well under a second on 64 KiB;
    # catastrophic backtracking would take minutes.
    started = time.perf_counter()
    out, found = redact(text)
    assert scan(out) == []
    assert isinstance(found, list)
    assert time.perf_counter() - started < 30


def test_an_unquoted_value_keeps_an_ampersand_unless_a_new_key_follows() -> None:
    """`&` inside a bare password is part of it; `&next=` in a query string starts the next parameter."""
    value = "q8Zr!x2Lp" + "&" + "9vKm3TzW"
    text = f"DB_PASSWORD={value}"
    assert [(f.kind, text[f.start : f.end]) for f in scan(text)] == [("assignment", value)]
    url = "https://x.io/cb?token=" + "Zq8rX2Lp9vKm3TzWq" + "&next=/home"
    assert [url[f.start : f.end] for f in scan(url)] == ["Zq8rX2Lp9vKm3TzWq"]
