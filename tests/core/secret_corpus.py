"""Fabricated secrets in realistic formats and contexts (none of them is real).

Each case is (kind, secret, text): ``text`` embeds ``secret`` the way it shows
up in agent transcripts -- prose, shell, config, JSON, headers, URLs. Random
parts come from a seeded hash, so the corpus is the same on every run.
"""

from __future__ import annotations

import base64
import hashlib
import json
import string
from typing import NamedTuple

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
LOWER_DIGITS = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "-_"
BASE64 = ALNUM + "+/"


class SecretCase(NamedTuple):
    kind: str
    secret: str
    text: str


def fake(seed: str, length: int, alphabet: str = ALNUM) -> str:
    """Deterministic pseudo-random string: not a key anyone issued."""
    out: list[str] = []
    counter = 0
    while len(out) < length:
        digest = hashlib.sha256(f"{seed}:{counter}".encode()).digest()
        out.extend(alphabet[b % len(alphabet)] for b in digest)
        counter += 1
    return "".join(out[:length])


def _b64url(data: dict[str, object]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _jwt(seed: str) -> str:
    header = _b64url({"alg": "HS256", "typ": "JWT"})
    payload = _b64url({"sub": fake(seed, 10, LOWER_DIGITS), "iat": 1700000000, "name": "Fake"})
    return f"{header}.{payload}.{fake(seed + 'sig', 43, URLSAFE)}"


def _pem(label: str, seed: str, lines: int = 6) -> str:
    body = "\n".join(fake(f"{seed}{i}", 64, BASE64) for i in range(lines))
    return f"-----BEGIN {label}-----\n{body}\n{fake(seed, 20, BASE64)}==\n-----END {label}-----"


def _cases() -> list[SecretCase]:
    openai_proj = "sk-proj-" + fake("oa1", 156, URLSAFE)
    openai_legacy = "sk-" + fake("oa2", 20) + "T3BlbkFJ" + fake("oa3", 20)
    openai_svc = "sk-svcacct-" + fake("oa4", 120, URLSAFE)
    openai_plain = "sk-" + fake("oa5", 48)
    anthropic = "sk-ant-api03-" + fake("an1", 93, URLSAFE) + "AA"
    anthropic_admin = "sk-ant-admin01-" + fake("an2", 93, URLSAFE) + "AA"
    ghp = "ghp_" + fake("gh1", 36)
    gho = "gho_" + fake("gh2", 36)
    ghs = "ghs_" + fake("gh3", 36)
    gh_pat = "github_pat_" + fake("gh4", 22) + "_" + fake("gh5", 59)
    akia = "AKIA" + fake("aws1", 16, UPPER_DIGITS)
    asia = "ASIA" + fake("aws2", 16, UPPER_DIGITS)
    aws_secret = fake("aws3", 40, BASE64)
    aws_secret2 = fake("aws4", 40, BASE64)
    xoxb = f"xoxb-{fake('sl1', 12, string.digits)}-{fake('sl2', 13, string.digits)}-" + fake("sl3", 24)
    xoxp = f"xoxp-{fake('sl4', 12, string.digits)}-{fake('sl5', 12, string.digits)}-" + fake("sl6", 32, HEX)
    xapp = f"xapp-1-A{fake('sl7', 10, UPPER_DIGITS)}-{fake('sl8', 13, string.digits)}-" + fake("sl9", 64, HEX)
    webhook = (
        "https://hooks.slack.com/services/T"
        + fake("wh1", 10, UPPER_DIGITS)
        + "/B"
        + fake("wh2", 10, UPPER_DIGITS)
        + "/"
        + fake("wh3", 24)
    )
    stripe_live = "sk_live_" + fake("st1", 99)
    stripe_test = "sk_test_" + fake("st2", 24)
    stripe_restricted = "rk_live_" + fake("st3", 24)
    stripe_webhook = "whsec_" + fake("st4", 32)
    google = "AIza" + fake("go1", 35, URLSAFE)
    google_oauth = "GOCSPX-" + fake("go2", 28, URLSAFE)
    jwt = _jwt("jw1")
    jwt2 = _jwt("jw2")
    rsa = _pem("RSA PRIVATE KEY", "pk1")
    openssh = _pem("OPENSSH PRIVATE KEY", "pk2")
    pkcs8 = _pem("PRIVATE KEY", "pk3")
    ec = _pem("EC PRIVATE KEY", "pk4", 3)
    url_pw1 = fake("up1", 16)
    url_pw2 = "p4ss-" + fake("up2", 10)
    url_pw3 = fake("up3", 24)
    gitlab = "glpat-" + fake("gl1", 20, URLSAFE)
    pypi = "pypi-AgEIcHlwaS5vcmc" + fake("py1", 120, URLSAFE)
    npm = "npm_" + fake("np1", 36)
    sendgrid = "SG." + fake("sg1", 22, URLSAFE) + "." + fake("sg2", 43, URLSAFE)
    hf = "hf_" + fake("hf1", 34)
    telegram = fake("tg1", 10, string.digits) + ":AA" + fake("tg2", 33, URLSAFE)
    mailchimp = fake("mc1", 32, HEX) + "-us14"
    bearer = fake("br1", 40, URLSAFE)
    kw_pw = "Tr0ub4dor&" + fake("kw1", 4)
    kw_api = fake("kw2", 32, HEX)
    kw_env = fake("kw3", 24)
    kw_yaml = "s3cr3t-" + fake("kw4", 8)
    kw_json = fake("kw5", 20) + "!9"
    kw_db = "hunter2" + fake("kw6", 3, string.digits)
    kw_token = fake("kw7", 40)
    return [
        SecretCase("openai_key", openai_proj, f"export OPENAI_API_KEY={openai_proj}"),
        SecretCase("openai_key", openai_legacy, f"My old key was {openai_legacy}, rotate it."),
        SecretCase("openai_key", openai_svc, f'client = OpenAI(api_key="{openai_svc}")'),
        SecretCase("openai_key", openai_plain, f"curl -H 'Authorization: Bearer {openai_plain}'"),
        SecretCase("anthropic_key", anthropic, f"ANTHROPIC_API_KEY={anthropic}"),
        SecretCase("anthropic_key", anthropic_admin, f"use {anthropic_admin} for the admin API"),
        SecretCase("github_token", ghp, f"git clone https://{ghp}@github.com/acme/app.git"),
        SecretCase("github_token", gho, f"token: {gho}"),
        SecretCase("github_token", ghs, f"The CI token is {ghs}."),
        SecretCase("github_token", gh_pat, f"GH_TOKEN={gh_pat} gh pr list"),
        SecretCase("aws_access_key", akia, f"aws_access_key_id = {akia}"),
        SecretCase("aws_access_key", asia, f"Found {asia} in the logs"),
        SecretCase("aws_secret_key", aws_secret, f"aws_secret_access_key = {aws_secret}"),
        SecretCase("aws_secret_key", aws_secret2, f'AWS_SECRET_ACCESS_KEY="{aws_secret2}"'),
        SecretCase("slack_token", xoxb, f"SLACK_BOT_TOKEN={xoxb}"),
        SecretCase("slack_token", xoxp, f"user token {xoxp} expired"),
        SecretCase("slack_token", xapp, f"app-level token: {xapp}"),
        SecretCase("slack_webhook", webhook, f"POST to {webhook} with the payload"),
        SecretCase("stripe_key", stripe_live, f"stripe.api_key = '{stripe_live}'"),
        SecretCase("stripe_key", stripe_test, f"Use {stripe_test} in staging."),
        SecretCase("stripe_key", stripe_restricted, f"restricted key {stripe_restricted}"),
        SecretCase("stripe_key", stripe_webhook, f"STRIPE_WEBHOOK_SECRET={stripe_webhook}"),
        SecretCase("google_api_key", google, f"https://maps.googleapis.com/maps/api?key={google}"),
        SecretCase("google_oauth_secret", google_oauth, f'"client_secret": "{google_oauth}"'),
        SecretCase("jwt", jwt, f"Authorization: Bearer {jwt}"),
        SecretCase("jwt", jwt2, f"the session cookie is {jwt2}; it expires tomorrow"),
        SecretCase("private_key", rsa, f"Here is the deploy key:\n{rsa}\nkeep it safe"),
        SecretCase("private_key", openssh, f"$ cat ~/.ssh/id_ed25519\n{openssh}\n$ "),
        SecretCase("private_key", pkcs8, f"key.pem:\n{pkcs8}"),
        SecretCase("private_key", ec, f"{ec}\n"),
        SecretCase("url_password", url_pw1, f"DATABASE_URL=postgres://app:{url_pw1}@db.internal:5432/app"),
        SecretCase("url_password", url_pw2, f"redis://:{url_pw2}@cache:6379/0 is the broker"),
        SecretCase("url_password", url_pw3, f"see https://alice:{url_pw3}@example.com/private"),
        SecretCase("gitlab_token", gitlab, f"GITLAB_TOKEN {gitlab}"),
        SecretCase("pypi_token", pypi, f"password = {pypi}"),
        SecretCase("npm_token", npm, f"//registry.npmjs.org/:_authToken={npm}"),
        SecretCase("sendgrid_key", sendgrid, f"SENDGRID_API_KEY={sendgrid}"),
        SecretCase("huggingface_token", hf, f"huggingface-cli login --token {hf}"),
        SecretCase("telegram_bot_token", telegram, f"bot = Bot({telegram!r})"),
        SecretCase("mailchimp_key", mailchimp, f"mailchimp key {mailchimp}"),
        SecretCase("bearer_token", bearer, f"curl -H 'Authorization: Bearer {bearer}' api/v1"),
        SecretCase("generic_secret", kw_pw, f'password = "{kw_pw}"'),
        SecretCase("generic_secret", kw_api, f"api_key: {kw_api}"),
        SecretCase("generic_secret", kw_env, f"export DB_PASSWORD='{kw_env}'"),
        SecretCase("generic_secret", kw_yaml, f"  client_secret: {kw_yaml}"),
        SecretCase("generic_secret", kw_json, f'{{"user": "bob", "password": "{kw_json}"}}'),
        SecretCase("generic_secret", kw_db, f"the wifi password: {kw_db}"),
        SecretCase("generic_secret", kw_token, f'"access_token": "{kw_token}",'),
        SecretCase("generic_secret", "correcthorsebattery", 'db_password = "correcthorsebattery"'),
    ]


CASES: list[SecretCase] = _cases()

# Every case together in one text, the way a long tool result would carry them.
COMBINED: str = "\n\n".join(case.text for case in CASES)

# Prose and code that look a little like secrets but are not.
NEAR_MISSES: list[str] = [
    "I told her a secret: I love painting sunsets.",
    "The password is something only we know.",
    "Her secret: patience.",
    "password = get_password()",
    'password = "${DB_PASSWORD}"',
    "api_key: <your-api-key>",
    "token: null",
    "The task-list has sk-items and risk-free options.",
    "Call me at 555-123-4567 or visit https://example.com/path?q=1",
    "commit 3f2a9c1e8b7d6a5f4e3c2b1a0f9e8d7c6b5a4f3e fixed it",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "SELECT * FROM users WHERE id = 42;",
    "git@github.com:acme/app.git",
    "https://user@example.com/no-password-here",
    "mailto:alice@example.com",
    "The AKIA prefix marks AWS access keys.",
    "-----BEGIN CERTIFICATE-----",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeFakeFakeFakeFakeFakeFakeFake alice@laptop",
    "Bearer tokens are passed in the Authorization header.",
    "A token of appreciation, 2023-05-08.",
    "Passwords must be at least 12 characters long.",
    '{"secret_name": "my-app-prod-db", "api_key_header": "X-Api-Key"}',
]
