"""Realistic secrets for the redaction tests and benchmark, made here at random in the shapes providers publish
(prefixes, lengths, alphabets), placed in the lines and files where people leave them.

Nothing here is a real credential: every value is drawn from a seeded random generator when a test asks for it, so
this file holds no secret a scanner would flag.

    from secret_shapes import make_repository_files

    files, secrets, canaries = make_repository_files(seed=1)   # {path: text}, [Secret], [canary words]

``Secret.value`` is the part that must never be stored or served; ``Secret.probes`` are the strings a check looks
for (the value and, for long values, a middle piece of it, so that a half-redacted value is caught too). The
canaries are ordinary identifiers written beside the secrets: a check that finds the canaries where it looks, and no
secret, shows that it could have found one.
"""

from __future__ import annotations

import base64
import random
import string
from dataclasses import dataclass, field

UPPER_DIGITS = string.ascii_uppercase + string.digits
ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
PASSWORD = ALNUM + "!#%^*_-+"


def _draw(rng: random.Random, alphabet: str, n: int) -> str:
    # Two character classes at least: a drawn value of one class could read as a word or a number.
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(n))
        if sum(any(c in cls for c in value) for cls in (string.ascii_lowercase, string.ascii_uppercase,
                                                        string.digits)) >= 2:
            return value


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _b64(rng: random.Random, n_bytes: int) -> str:
    return base64.b64encode(bytes(rng.randrange(256) for _ in range(n_bytes))).decode()


# shape -> value maker. Each is the published form of a provider's credential, with random content.
SHAPES = {
    "aws_access_key": lambda r: "AKIA" + "".join(r.choice(UPPER_DIGITS) for _ in range(16)),
    "aws_secret_key": lambda r: _b64(r, 30),
    "github_token": lambda r: "gh" + "p_" + _draw(r, ALNUM, 36),
    "gitlab_token": lambda r: "glp" + "at-" + _draw(r, URLSAFE, 20),
    "slack_token": lambda r: "xo" + f"xb-{r.randrange(10**9, 10**10)}-{r.randrange(10**11, 10**12)}-"
                   + _draw(r, ALNUM, 24),
    "slack_webhook": lambda r: "https://hooks.slack." + "com/services/T" + _draw(r, UPPER_DIGITS, 8) + "/B"
                     + _draw(r, UPPER_DIGITS, 8) + "/" + _draw(r, ALNUM, 24),
    "stripe_key": lambda r: "sk_" + "live_" + _draw(r, ALNUM, 24),
    "sendgrid_key": lambda r: "S" + "G." + _draw(r, URLSAFE, 22) + "." + _draw(r, URLSAFE, 43),
    "azure_storage_key": lambda r: _b64(r, 64),
    "google_api_key": lambda r: "AI" + "za" + _draw(r, URLSAFE, 35),
    "openai_key": lambda r: "sk-" + "proj-" + _draw(r, URLSAFE, 48),
    "npm_token": lambda r: "np" + "m_" + _draw(r, ALNUM, 36),
    "jwt": lambda r: ".".join((_b64url(b'{"alg":"HS256","typ":"JWT"}'),
                               _b64url(f'{{"sub":"{r.randrange(10**9)}","name":"{_draw(r, ALNUM, 8)}",'
                                       f'"iat":{r.randrange(1_500_000_000, 1_800_000_000)}}}'.encode()),
                               _draw(r, URLSAFE, 43))),
    # A password as people write one unquoted: it starts with a letter or a digit (YAML reads "!x" as a tag).
    "password": lambda r: r.choice(ALNUM) + _draw(r, PASSWORD, r.randrange(9, 19)),
    "basic_auth": lambda r: base64.b64encode(f"deploy:{_draw(r, ALNUM, 14)}".encode()).decode(),
    "bearer_token": lambda r: _draw(r, URLSAFE, 40),
    "connection_password": lambda r: _draw(r, ALNUM, 16),
    "telegram_token": lambda r: f"{r.randrange(10**8, 10**9)}:AA" + _draw(r, URLSAFE, 33),
    "huggingface_token": lambda r: "h" + "f_" + _draw(r, ALNUM, 34),
    "mailgun_key": lambda r: "ke" + "y-" + "".join(r.choice(HEX) for _ in range(32)),
}

# shape -> lines that hold it ({v}: the value), by file kind. The kinds are the files ``make_repository_files`` writes.
PLACES: dict[str, dict[str, list[str]]] = {
    "aws_access_key": {"py": ['AWS_ACCESS_KEY_ID = "{v}"'], "ini": ["aws_access_key_id = {v}"],
                       "sh": ["export AWS_ACCESS_KEY_ID={v}"], "md": ["Use the key `{v}` for the staging bucket."]},
    "aws_secret_key": {"ini": ["aws_secret_access_key = {v}"], "env": ["AWS_SECRET_ACCESS_KEY={v}"],
                       "yaml": ["  aws_secret_access_key: {v}"]},
    "github_token": {"py": ['    """Clone with the token {v} (the CI bot)."""'], "js": ['const gh = new Octokit({{ auth: "{v}" }});'],
                     "yaml": ["      GITHUB_TOKEN: {v}"], "docker": ["ARG GH_TOKEN={v}"]},
    "gitlab_token": {"sh": ['git clone https://oauth2:{v}@gitlab.example.com/team/app.git'],
                     "toml": ['token = "{v}"'], "json": ['  "gitlab": "{v}",']},
    "slack_token": {"js": ['const slack = new WebClient("{v}");'], "py": ['@notify(token="{v}")'],
                    "env": ["SLACK_BOT_TOKEN={v}"]},
    "slack_webhook": {"py": ['ALERTS = "{v}"'], "yaml": ["  webhook_url: {v}"], "json": ['  "webhook": "{v}",'],
                      "sh": ['curl -X POST -d @msg.json {v}'], "md": ["Alerts go to {v} (the #ops channel)."]},
    "stripe_key": {"py": ['@retry(api_key="{v}")'], "js": ['const stripe = require("stripe")("{v}");'],
                   "env": ["STRIPE_SECRET={v}"], "docker": ["ENV STRIPE_KEY={v}"]},
    "sendgrid_key": {"py": ['MAIL = {{"provider": "sendgrid", "key": "{v}"}}'], "json": ['  "sendgrid": "{v}",'],
                     "js": ['sgMail.setApiKey("{v}");']},
    "azure_storage_key": {"py": ['BLOB = "DefaultEndpointsProtocol=https;AccountName=appdata;AccountKey={v};'
                                 'EndpointSuffix=core.windows.net"'],
                          "json": ['  "storage": "DefaultEndpointsProtocol=https;AccountName=logs;AccountKey={v}",'],
                          "ini": ["connection = AccountName=files;AccountKey={v}"]},
    "google_api_key": {"js": ['const maps = loadMaps({{ key: "{v}" }});'], "yaml": ["  maps_key: {v}"],
                       "md": ["The browser key is `{v}`."]},
    "openai_key": {"py": ['def ask(question, key="{v}"):'], "env": ["OPENAI_API_KEY={v}"],
                   "toml": ['api_key = "{v}"']},
    "npm_token": {"sh": ['echo "//registry.npmjs.org/:_authToken={v}" > ~/.npmrc'], "docker": ["ARG NPM_TOKEN={v}"],
                  "ini": ["//registry.npmjs.org/:_authToken={v}"]},
    "jwt": {"js": ['const session = "{v}";'], "json": ['  "session": "{v}",'], "md": ["Test with `{v}`."]},
    "password": {"py": ['def connect(host, password="{v}"):', '    db_pass = "{v}"'],
                 "yaml": ["  db_pass: {v}", "  password: {v}"], "env": ["SMTP_PASS={v}", "DB_PASSWORD={v}"],
                 "sh": ["mysql -u root -p{v} app < dump.sql", "curl -u admin:{v} https://ci.example.com/api",
                        "sshpass -p {v} ssh deploy@host"],
                 "ini": ["SMTP_PASS = {v}", "password = {v}"], "toml": ['password = "{v}"'],
                 "docker": ["ENV DB_PASSWORD={v}"], "js": ['const dbPass = "{v}";']},
    "basic_auth": {"sh": ['curl -H "Authorization: Basic {v}" https://api.example.com/v1/items'],
                   "yaml": ["  AUTHORIZATION: basic {v}"], "py": ['HEADERS = {{"Authorization": "Basic {v}"}}']},
    "bearer_token": {"js": ['fetch(url, {{ headers: {{ Authorization: "Bearer {v}" }} }});'],
                     "sh": ['curl -H "Authorization: Bearer {v}" https://api.example.com/v1/me']},
    "connection_password": {"py": ['DATABASE_URL = "postgres://app:{v}@db.internal:5432/app"'],
                             "yaml": ["  url: mysql://root:{v}@10.0.0.5/app"],
                             "env": ["REDIS_URL=redis://default:{v}@cache:6379/0"]},
    "telegram_token": {"py": ['BOT = Bot("{v}")'], "env": ["TELEGRAM_BOT={v}"]},
    "huggingface_token": {"sh": ["huggingface-cli login --token {v}"], "py": ['login("{v}")']},
    "mailgun_key": {"js": ['const mg = mailgun.client({{ username: "api", key: "{v}" }});'],
                    "toml": ['mailgun = "{v}"']},
}

# The files, their kind, and the code around the secret lines (each secret line goes into a body of its own).
FILES = {
    "py": "app/settings.py", "js": "web/client.js", "yaml": "deploy/config.yaml", "env": ".env",
    "json": "config/app.json", "sh": "scripts/deploy.sh", "ini": "config/app.ini", "toml": "config/app.toml",
    "docker": "Dockerfile", "md": "docs/setup.md",
}


@dataclass
class Secret:
    shape: str
    kind: str  # the file kind it sits in
    path: str
    value: str
    probes: list[str] = field(default_factory=list)


def _probes(value: str) -> list[str]:
    out = [value]
    if len(value) >= 24:
        middle = len(value) // 2
        out.append(value[middle - 6: middle + 6])
    return out


def _py(lines: list[str], canaries: list[str]) -> str:
    out = ['"""Settings of the app."""', "import os", ""]
    for n, line in enumerate(lines):
        canary = canaries[n % len(canaries)]
        stripped = line.strip()
        if stripped.startswith("@"):
            out += [line, f"def job_{n}():", f"    return {canary!r}", ""]
        elif stripped.startswith("def "):
            out += [line, f"    return {canary!r}", ""]
        elif stripped.startswith('"""'):
            out += [f"def clone_{n}():", line, f"    return {canary!r}", ""]
        elif line.startswith("    "):
            out += [f"def setup_{n}():", line, f"    return {canary!r}", ""]
        else:
            out += [line, f"{canary.upper()}_{n} = 1", ""]
    return "\n".join(out) + "\n"


def _generic(kind: str, lines: list[str], canaries: list[str]) -> str:
    canary = canaries[0]
    if kind == "yaml":
        body = [f"service_{n}:\n  name: {canaries[n % len(canaries)]}\n{line}" for n, line in enumerate(lines)]
        return "\n".join(body) + "\n"
    if kind == "json":
        return "{\n" + "\n".join(lines) + f'\n  "name": "{canary}"\n}}\n'
    if kind == "js":
        body = [f"function call{n}() {{\n  {line}\n  return '{canaries[n % len(canaries)]}';\n}}"
                for n, line in enumerate(lines)]
        return "\n\n".join(body) + "\n"
    if kind == "sh":
        return "#!/bin/sh\nset -e\n" + "\n".join(f"# step {n}: {canaries[n % len(canaries)]}\n{line}"
                                                 for n, line in enumerate(lines)) + "\n"
    if kind in ("ini", "toml"):
        return "\n".join(f"[section_{n}]\nlabel = \"{canaries[n % len(canaries)]}\"\n{line}\n"
                         for n, line in enumerate(lines))
    if kind == "docker":
        return f"FROM python:3.12-slim\nLABEL name={canary}\n" + "\n".join(lines) + "\nRUN pip install app\n"
    if kind == "md":
        return "# Setup\n\n" + "\n\n".join(f"## Step {n} ({canaries[n % len(canaries)]})\n\n{line}"
                                           for n, line in enumerate(lines)) + "\n"
    if kind == "env":
        return f"APP_NAME={canary}\n" + "\n".join(lines) + "\n"
    raise ValueError(kind)


def _ppk(rng: random.Random, canary: str) -> tuple[str, list[str]]:
    public = [_b64(rng, 48)[:64] for _ in range(4)]
    private = [_b64(rng, 48)[:64] for _ in range(8)]
    mac = "".join(rng.choice(HEX) for _ in range(40))
    text = ("PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\n"
            f"Comment: {canary}\nPublic-Lines: {len(public)}\n" + "\n".join(public)
            + f"\nPrivate-Lines: {len(private)}\n" + "\n".join(private) + f"\nPrivate-MAC: {mac}\n")
    return text, private + [mac]


def _pem(rng: random.Random) -> tuple[str, list[str]]:
    body = [_b64(rng, 48) for _ in range(10)]
    return "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END RSA PRIVATE KEY-----\n", body


def make_repository_files(seed: int = 1, per_place: int = 2) -> tuple[dict[str, str], list[Secret], list[str]]:
    """({path: text}, the secrets in them, the canary words beside them): every shape in every place it has, each
    place ``per_place`` times with fresh values, plus a PuTTY key and a PEM key. ``per_place=2`` makes over 200."""
    rng = random.Random(seed)
    canaries = [f"canary{word}{n}" for n, word in enumerate(("Zebra", "Quokka", "Tapir", "Okapi", "Narwhal"))]
    lines: dict[str, list[str]] = {kind: [] for kind in FILES}
    secrets: list[Secret] = []
    for shape, places in PLACES.items():
        for kind, templates in places.items():
            for template in templates:
                for _ in range(per_place):
                    value = SHAPES[shape](rng)
                    lines[kind].append(template.format(v=value))
                    secrets.append(Secret(shape, kind, FILES[kind], value, _probes(value)))
    files = {FILES["py"]: _py(lines["py"], canaries)}
    for kind, path in FILES.items():
        if kind != "py":
            files[path] = _generic(kind, lines[kind], canaries)
    for n in range(per_place):
        text, parts = _ppk(rng, canaries[n])
        files[f"keys/deploy{n}.ppk"] = text
        secrets += [Secret("putty_private_key", "ppk", f"keys/deploy{n}.ppk", part, [part]) for part in parts]
        text, parts = _pem(rng)
        files[f"keys/server{n}.pem"] = text
        secrets += [Secret("pem_private_key", "pem", f"keys/server{n}.pem", part, _probes(part)) for part in parts]
    return files, secrets, canaries
