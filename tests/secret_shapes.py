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


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(HEX) for _ in range(n))


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
    # Provider tokens by their published prefixes and lengths.
    "anthropic_key": lambda r: "sk-" + "ant-api03-" + _draw(r, URLSAFE, 80),
    "github_pat": lambda r: "github" + "_pat_" + _draw(r, ALNUM, 22) + "_" + _draw(r, ALNUM, 59),
    "gitlab_runner_token": lambda r: "gl" + "rt-" + _draw(r, URLSAFE, 20),
    "shopify_token": lambda r: "shp" + "at_" + _hex(r, 32),
    "pypi_token": lambda r: "pypi-" + "AgE" + _draw(r, URLSAFE, 70),
    "square_token": lambda r: "sq0" + "atp-" + _draw(r, URLSAFE, 22),
    "databricks_token": lambda r: "da" + "pi" + _hex(r, 32),
    "digitalocean_token": lambda r: "do" + "p_v1_" + _hex(r, 64),
    "vault_token": lambda r: "hv" + "s." + _draw(r, ALNUM, 90),
    "google_oauth_secret": lambda r: "GOC" + "SPX-" + _draw(r, URLSAFE, 28),
    "atlassian_token": lambda r: "ATA" + "TT3" + _draw(r, URLSAFE, 180),
    "postman_key": lambda r: "PM" + "AK-" + _hex(r, 24) + "-" + _hex(r, 34),
    "linear_key": lambda r: "lin" + "_api_" + _draw(r, ALNUM, 40),
    "age_key": lambda r: "AGE-SECRET" + "-KEY-1" + "".join(r.choice(UPPER_DIGITS) for _ in range(58)),
    "discord_webhook": lambda r: "https://discord.com/api/" + f"webhooks/{r.randrange(10**17, 10**18)}/"
                       + _draw(r, URLSAFE, 68),
    "stripe_webhook_secret": lambda r: "wh" + "sec_" + _draw(r, ALNUM, 32),
    "twilio_account_sid": lambda r: "A" + "C" + _hex(r, 32),
    "twilio_api_key": lambda r: "S" + "K" + _hex(r, 32),
    "azure_client_secret": lambda r: (_draw(r, ALNUM, 3) + str(r.randrange(10)) + "Q" + "~"
                                      + _draw(r, ALNUM + "_~.-", 34)),
    "grafana_token": lambda r: "gl" + "c_" + _draw(r, ALNUM, 60),
    "doppler_token": lambda r: "dp." + "pt." + _draw(r, ALNUM, 43),
    "pulumi_token": lambda r: "pu" + "l-" + _hex(r, 40),
    "sentry_token": lambda r: "sntr" + "yu_" + _hex(r, 64),
    "figma_token": lambda r: "fig" + "d_" + _draw(r, URLSAFE, 40),
    "notion_token": lambda r: "nt" + "n_" + "".join(r.choice(string.digits) for _ in range(11)) + _draw(r, ALNUM, 35),
    "planetscale_token": lambda r: "pscale" + "_tkn_" + _draw(r, ALNUM, 43),
    "dynatrace_token": lambda r: "dt0c01." + _draw(r, UPPER_DIGITS, 24) + "." + _draw(r, UPPER_DIGITS, 64),
    "newrelic_key": lambda r: "NR" + "AK-" + _draw(r, UPPER_DIGITS, 27),
    "supabase_token": lambda r: "sb" + "p_" + _hex(r, 40),
    "slack_app_token": lambda r: "xa" + f"pp-1-A{_draw(r, UPPER_DIGITS, 10)}-{r.randrange(10**12, 10**13)}-"
                       + _hex(r, 64),
    "groq_key": lambda r: "gs" + "k_" + _draw(r, ALNUM, 52),
    "replicate_token": lambda r: "r8" + "_" + _draw(r, ALNUM, 37),
    "perplexity_key": lambda r: "pp" + "lx-" + _draw(r, ALNUM, 48),
    "tailscale_key": lambda r: "tskey" + "-auth-" + _draw(r, ALNUM, 12) + "-" + _draw(r, ALNUM, 30),
    "sendinblue_key": lambda r: "xkey" + "sib-" + _hex(r, 64) + "-" + _draw(r, ALNUM, 16),
    "contentful_token": lambda r: "CF" + "PAT-" + _draw(r, URLSAFE, 43),
    "clojars_token": lambda r: "CLOJARS" + "_" + "".join(r.choice(string.ascii_lowercase + string.digits)
                                                          for _ in range(60)),
    "prefect_key": lambda r: "pn" + "u_" + _draw(r, ALNUM, 36),
    "mapbox_token": lambda r: "sk." + "eyJ" + _draw(r, URLSAFE, 60) + "." + _draw(r, URLSAFE, 22),
    # Credentials in the places that have no "name = value" of their own.
    "kube_client_key": lambda r: _b64(r, 120),
    "wordpress_salt": lambda r: _draw(r, ALNUM + "!#^_-+ |@:;,?/~()[]=", 64),
    "defined_password": lambda r: r.choice(ALNUM) + _draw(r, ALNUM + "!#^_-+", 14),
    "libpq_password": lambda r: _draw(r, ALNUM, 16),
    "jdbc_password": lambda r: _draw(r, ALNUM, 16),
    "setter_password": lambda r: _draw(r, ALNUM + "!#^_-+", 16),
    "pw_name": lambda r: _draw(r, ALNUM, 14),
    "terraform_default": lambda r: _draw(r, ALNUM + "!#^_-+", 18),
    "curl_api_key_header": lambda r: _draw(r, URLSAFE, 32),
    "netrc_password": lambda r: _draw(r, ALNUM, 18),
    "pgpass_password": lambda r: _draw(r, ALNUM, 18),
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
    "kube_client_key": {"yaml": ["    client-key-data: {v}"]},
    "wordpress_salt": {"php": ["define( 'AUTH_KEY', '{v}' );", "define('NONCE_SALT', '{v}');"]},
    "defined_password": {"php": ["define('DB_PASSWORD', '{v}');"]},
    "libpq_password": {"py": ['DSN = "host=db.internal port=5432 dbname=app user=app password={v}"'],
                       "java": ['String dsn = "host=db user=app password={v}";']},
    "jdbc_password": {"java": ['String url = "jdbc:postgresql://db:5432/app?user=app&password={v}";',
                               'String mssql = "jdbc:sqlserver://db;databaseName=app;user=sa;password={v}";']},
    "setter_password": {"java": ['ds.setPassword("{v}");', 'client.setApiKey("{v}");']},
    "pw_name": {"py": ['smtp_pw = "{v}"'], "sh": ["export DB_PW={v}"], "js": ['const adminPw = "{v}";']},
    "terraform_default": {"tf": ['variable "db_password" {{\n  type      = string\n  sensitive = true\n'
                                 '  default   = "{v}"\n}}']},
    "curl_api_key_header": {"sh": ["curl -H 'X-Api-Key: {v}' https://api.example.com/v1/items"]},
    "netrc_password": {"txt": ["machine api.example.com login deploy password {v}",
                               "machine ci.example.com\n  login builder\n  password {v}"]},
    "pgpass_password": {"txt": ["db.internal:5432:app:deploy:{v}", "*:*:*:replicator:{v}"]},
    "stripe_webhook_secret": {"py": ['event = stripe.Webhook.construct_event(payload, signature, "{v}")']},
    "twilio_account_sid": {"py": ['TWILIO_ACCOUNT_SID = "{v}"'], "js": ['const client = twilio("{v}", authToken);']},
    "twilio_api_key": {"py": ['client = Client("{v}", api_secret, account_sid)']},
    "azure_client_secret": {"py": ['credential = ClientSecretCredential(tenant_id, client_id, "{v}")'],
                            "json": ['  "clientSecret": "{v}",']},
}

# Provider tokens that go in the usual places: a call's argument, a config value, a variable of the shell.
for _shape in ("anthropic_key", "github_pat", "gitlab_runner_token", "shopify_token", "pypi_token", "square_token",
               "databricks_token", "digitalocean_token", "vault_token", "google_oauth_secret", "atlassian_token",
               "postman_key", "linear_key", "age_key", "discord_webhook", "grafana_token", "doppler_token",
               "pulumi_token", "sentry_token", "figma_token", "notion_token", "planetscale_token", "dynatrace_token",
               "newrelic_key", "supabase_token", "slack_app_token", "groq_key", "replicate_token", "perplexity_key",
               "tailscale_key", "sendinblue_key", "contentful_token", "clojars_token", "prefect_key",
               "mapbox_token"):
    PLACES[_shape] = {"py": ['client = connect("{v}")'], "yaml": ["  credential: {v}"],
                      "sh": ["deploy --with {v}"]}

# The files, their kind, and the code around the secret lines (each secret line goes into a body of its own).
FILES = {
    "py": "app/settings.py", "js": "web/client.js", "yaml": "deploy/config.yaml", "env": ".env",
    "json": "config/app.json", "sh": "scripts/deploy.sh", "ini": "config/app.ini", "toml": "config/app.toml",
    "docker": "Dockerfile", "md": "docs/setup.md", "php": "site/config.php", "java": "src/Db.java",
    "tf": "infra/variables.tf", "txt": "ops/hosts.txt",
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
    if kind == "php":
        return f"<?php\n// {canary}\n" + "\n".join(lines) + "\n"
    if kind == "java":
        body = [f"    void open{n}() {{\n        {line}\n        log(\"{canaries[n % len(canaries)]}\");\n    }}"
                for n, line in enumerate(lines)]
        return "class Db {\n" + "\n\n".join(body) + "\n}\n"
    if kind == "tf":
        return f'# {canary}\nvariable "region" {{\n  default = "eu-west-1"\n}}\n\n' + "\n\n".join(lines) + "\n"
    if kind == "txt":
        return f"# hosts ({canary})\n" + "\n".join(lines) + "\n"
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
