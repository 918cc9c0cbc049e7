"""Secrets never leave the chunker: what ``localidx.safety.redact`` replaces, what it leaves alone, and that lines hold.

Every fake secret is assembled at run time from harmless pieces, so secret scanners do not flag this file.
"""

from __future__ import annotations

import pytest

from localidx.safety.redact import redact, redact_env

ALNUM = "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A7cD9"  # 40 characters of key-looking filler


def _marker(kind: str) -> str:
    return f"«redacted:{kind}»"


AWS_KEY = "AKIA" + "ABCDEFGHIJKLMNOP"
GITHUB = "ghp" + "_" + ALNUM[:36]
JWT = "eyJ" + "hbGciOiJIUzI1NiJ9" + "." + "eyJ" + "zdWIiOiIxMjM0NTY3ODkwIn0" + "." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9Pl"

SECRETS = [
    pytest.param(f'aws_key = "{AWS_KEY}"', AWS_KEY, "aws_access_key", id="aws-access-key"),
    pytest.param(f'AWS_SECRET_ACCESS_KEY = "{ALNUM}"', ALNUM, "aws_secret_key", id="aws-secret-key"),
    pytest.param(f"client = Github('{GITHUB}')", GITHUB, "github_token", id="github"),
    pytest.param("pat = '" + "github_pat_" + ALNUM[:30] + "'", "github_pat_" + ALNUM[:30], "github_token", id="gh-pat"),
    pytest.param("x = '" + "glpat-" + ALNUM[:20] + "'", "glpat-" + ALNUM[:20], "gitlab_token", id="gitlab"),
    pytest.param("hook = '" + "xoxb-" + "1234567890-" + ALNUM[:24] + "'", "xoxb-1234567890-" + ALNUM[:24],
                 "slack_token", id="slack"),
    pytest.param("stripe.key = '" + "sk_live_" + ALNUM[:24] + "'", "sk_live_" + ALNUM[:24], "stripe_key", id="stripe"),
    pytest.param("client(k='" + "sk-" + "proj-" + ALNUM[:30] + "')", "sk-proj-" + ALNUM[:30], "openai_key",
                 id="openai"),
    pytest.param("client(k='" + "sk-ant-" + "api03-" + ALNUM[:30] + "')", "sk-ant-api03-" + ALNUM[:30],
                 "anthropic_key", id="anthropic"),
    pytest.param("maps('" + "AIza" + ALNUM[:35] + "')", "AIza" + ALNUM[:35], "google_api_key", id="google"),
    pytest.param("//registry/:_authToken=" + "npm_" + ALNUM[:36], "npm_" + ALNUM[:36], "npm_token", id="npm"),
    pytest.param(f"headers = {{'X-Session': '{JWT}'}}", JWT, "jwt", id="jwt"),
    pytest.param('password = "hunter22"', "hunter22", "password", id="password-assignment"),
    pytest.param("db:\n  password: S3cr" + "etPassw0rd!\n", "S3cretPassw0rd!", "password", id="yaml-password"),
    pytest.param('{"client_secret": "k3J9' + 'sLm2QpX8vR4"}', "k3J9sLm2QpX8vR4", "secret", id="json-secret"),
    pytest.param("SECRET_KEY=a8Fj3kL" + "q9Zx2Pm\n", "a8Fj3kLq9Zx2Pm", "secret", id="env-style"),
    pytest.param('token := "AbcDef123' + 'Ghi456"', "AbcDef123Ghi456", "token", id="go-short-assign"),
    pytest.param('api_key: str = "Zx9Qw8Er' + '7Ty6Ui5"', "Zx9Qw8Er7Ty6Ui5", "api_key", id="annotated"),
    pytest.param("$apiKey = 'Qm9vYmFy" + "Wm9vYmF6MTIz';", "Qm9vYmFyWm9vYmF6MTIz", "api_key", id="php-camel"),
    pytest.param("'password' => 'pa55" + "W0rd9!x'", "pa55W0rd9!x", "password", id="php-array"),
    pytest.param("h = {'Authorization': 'Bearer abcDEF123" + "456ghiJKL'}", "abcDEF123456ghiJKL", "token",
                 id="bearer-header"),
]


@pytest.mark.parametrize(("text", "secret", "kind"), SECRETS)
def test_each_kind_of_secret_is_redacted(text: str, secret: str, kind: str):
    out, found = redact(text)
    assert secret not in out
    assert _marker(kind) in out
    assert [r.kind for r in found] == [kind]
    assert out.count("\n") == text.count("\n")


def test_text_around_a_secret_is_unchanged():
    text = f'before = 1\nkey = "{AWS_KEY}"  # the deploy key\nafter = 2\n'
    out, found = redact(text)
    assert out == f'before = 1\nkey = "{_marker("aws_access_key")}"  # the deploy key\nafter = 2\n'
    assert [(r.kind, r.line) for r in found] == [("aws_access_key", 2)]


def test_private_key_block_keeps_its_line_count():
    body = "\n".join(ALNUM[i:] + ALNUM[:i] for i in range(3))
    block = "-----BEGIN RSA PRIVATE KEY-----\n" + body + "\n-----END RSA PRIVATE KEY-----"
    text = "import ssl\n\nKEY = '''\n" + block + "\n'''\nload(KEY)\n"
    out, found = redact(text)
    assert block.count("\n") == 4  # a 5-line block
    assert out.splitlines() == ["import ssl", "", "KEY = '''", _marker("private_key"), "", "", "", "", "'''",
                                "load(KEY)"]
    assert [(r.kind, r.line) for r in found] == [("private_key", 4)]


def test_private_key_in_a_json_string_and_unterminated_blocks():
    escaped = '{"private_key": "-----BEGIN PRIVATE KEY-----\\n' + ALNUM + '\\n-----END PRIVATE KEY-----\\n"}'
    out, _ = redact(escaped)
    assert out == '{"private_key": "' + _marker("private_key") + '\\n"}'
    cut = "x = 1\n-----BEGIN OPENSSH PRIVATE KEY-----\n" + ALNUM + "\n" + ALNUM + "\n"
    out, _ = redact(cut)
    assert out == "x = 1\n" + _marker("private_key") + "\n\n\n"


def test_connection_string_loses_only_its_password():
    text = 'DATABASE = "postgres://admin:' + 'pa55W0rd9@db.internal:5432/app"'
    out, found = redact(text)
    assert out == 'DATABASE = "postgres://admin:' + _marker("connection_string") + '@db.internal:5432/app"'
    assert [r.kind for r in found] == ["connection_string"]


NOT_SECRETS = [
    "token = get_token()",
    'password = os.environ["DB_PASSWORD"]',
    "api_key = os.getenv('API_KEY')",
    'password_field = "password"',
    'token = "<your-token>"',
    'api_key = "xxx"',
    'token = "${TOKEN}"',
    "secret: {{ .Values.secret }}",
    'password = "changeme"',
    'token_type = "Bearer"',
    'auth_header = "X-Auth-Token"',
    "password = self.password_value",
    "max_tokens = 100000000",
    'author = "Guido van Rossum"',
    'secret_name = "prod/db/creds9x"',
    'auth_url = "https://login.example.com/oauth2/authorize"',
    "for token in tokenize.generate_tokens(readline):",
    "private_key: ed25519.Ed25519PrivateKey,",
    'url = "postgres://user:password@localhost/db"',
    'if line.startswith("-----BEGIN RSA PRIVATE KEY-----"):',
    'css = "sk-spinner-double-bounce-anim"',
    "Plain prose about a secret handshake and a password reset flow.",
]


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_non_secrets_come_back_as_the_same_string(text: str):
    out, found = redact(text)
    assert out is text
    assert found == []


def test_several_secrets_report_their_lines():
    text = f'a = "{AWS_KEY}"\n\n\nb = "{GITHUB}"\nc = 3\npassword = "hunter22"\n'
    out, found = redact(text)
    assert [(r.kind, r.line) for r in found] == [("aws_access_key", 1), ("github_token", 4), ("password", 6)]
    assert len(out.splitlines()) == len(text.splitlines())


def test_redact_env_redacts_secret_looking_keys_only():
    text = (
        "# local settings\n"
        "DEBUG=true\n"
        "DB_PASSWORD=hello\n"
        'export STRIPE_API_KEY="abc"\n'
        "SENTRY_DSN=https://k@o1.ingest.example.io/1\n"
        "AUTH_ENABLED=true\n"
        "TOKEN_TTL=3600\n"
        "GITHUB_TOKEN=${CI_TOKEN}\n"
        "APP_NAME=shop\n"
    )
    out, found = redact_env(text)
    assert out.splitlines() == [
        "# local settings",
        "DEBUG=true",
        "DB_PASSWORD=" + _marker("password"),
        'export STRIPE_API_KEY="' + _marker("api_key") + '"',
        "SENTRY_DSN=" + _marker("connection_string"),
        "AUTH_ENABLED=true",
        "TOKEN_TTL=3600",
        "GITHUB_TOKEN=${CI_TOKEN}",
        "APP_NAME=shop",
    ]
    assert [r.line for r in found] == [3, 4, 5]


def test_redact_env_reads_a_crlf_file_as_it_reads_any_other():
    out, found = redact_env("DB_PASSWORD=hello\r\nAPI_KEY=abc\r\nPORT=1\r\n")
    assert out == f"DB_PASSWORD={_marker('password')}\r\nAPI_KEY={_marker('api_key')}\r\nPORT=1\r\n"
    assert [r.line for r in found] == [1, 2]


def test_redact_env_also_catches_secrets_under_innocent_keys_and_multiline_values():
    text = f'NOTES="{AWS_KEY}"\nSIGNING_PRIVATE_KEY="line1\nline2\nline3"\nPORT=8080\n'
    out, found = redact_env(text)
    assert out == ('NOTES="' + _marker("aws_access_key") + '"\nSIGNING_PRIVATE_KEY="' + _marker("secret")
                   + '\n\n"\nPORT=8080\n')
    assert [(r.kind, r.line) for r in found] == [("aws_access_key", 1), ("secret", 2)]


# -- the shapes people leave in scripts and config, each made here from harmless pieces ----------------------------

B64_64 = "q" * 8 + ALNUM + ALNUM[:40]  # 88 characters of base64-looking filler, as an Azure account key has
BASIC = "ZGVwbG95OlM" + "zY3JldFBhc3M5"  # base64 of "deploy:S3cretPass9"

MORE_SECRETS = [
    pytest.param('ALERTS = "https://hooks.slack.com/services/T0' + 'ABCD1234/B0ABCD1234/' + ALNUM[:24] + '"',
                 ALNUM[:24], "slack_webhook", id="slack-webhook"),
    pytest.param("conn = AccountName=files;Account" + "Key=" + B64_64 + ";", B64_64, "azure_key", id="azure-key"),
    pytest.param("db_pass: Xk29dq" + "Lm77v", "Xk29dqLm77v", "password", id="yaml-db-pass"),
    pytest.param('SMTP_PASS = "Qw8erT' + 'y6Ui"', "Qw8erTy6Ui", "password", id="smtp-pass"),
    pytest.param("mysql -u root -pZq7Xw" + "9Kd2 app < dump.sql", "Zq7Xw9Kd2", "password", id="mysql-p"),
    pytest.param("curl -u admin:Pz9Lq" + "2Wx7 https://ci.example.com", "Pz9Lq2Wx7", "password", id="curl-u"),
    pytest.param("sshpass -p Hx8dK" + "2pq ssh deploy@host", "Hx8dK2pq", "password", id="sshpass"),
    pytest.param("GET /hook?token=ab12" + "cd34ef&user=x", "ab12cd34ef", "token", id="query-string"),
    pytest.param("MAIL = {'key': 'S" + "G." + ALNUM[:22] + "." + ALNUM[:40] + "Zz9'}",
                 "SG." + ALNUM[:22] + "." + ALNUM[:40] + "Zz9", "sendgrid_key", id="sendgrid-dict-value"),
    pytest.param("AUTHORIZATION: basic " + BASIC, BASIC, "basic_auth", id="basic-header"),
    pytest.param('curl -H "Authorization: Bearer ' + ALNUM[:32] + '" https://api', ALNUM[:32], "token",
                 id="bearer-curl"),
    pytest.param("bot = Bot('123456789:AA" + ALNUM[:33] + "')", "123456789:AA" + ALNUM[:33], "telegram_token",
                 id="telegram"),
    pytest.param("login('h" + "f_" + ALNUM[:34] + "')", "hf_" + ALNUM[:34], "huggingface_token", id="huggingface"),
]


@pytest.mark.parametrize(("text", "secret", "kind"), MORE_SECRETS)
def test_script_and_config_shapes_are_redacted(text: str, secret: str, kind: str):
    out, found = redact(text)
    assert secret not in out, out
    assert _marker(kind) in out
    assert [r.kind for r in found] == [kind]


def test_putty_private_lines_and_mac_go_the_public_ones_stay():
    public = ALNUM[:30]
    private = [ALNUM[i:i + 30] for i in (2, 5)]
    mac = "0a1b2c3d4e5f6a7b8c9d"
    text = (f"PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: deploy\nPublic-Lines: 1\n{public}\n"
            f"Private-Lines: 2\n{private[0]}\n{private[1]}\nPrivate-MAC: {mac}\n")
    out, found = redact(text)
    assert public in out and not any(p in out for p in private) and mac not in out
    assert [r.kind for r in found] == ["private_key"] and out.count("\n") == text.count("\n")


MORE_NOT_SECRETS = [
    'bypass = "abcdefgh123"',
    "index pass: reason=post-commit paths=1",
    "compass: Xk29dqLm77v",
    "mysql -u root -p app",  # -p alone: mysql prompts for it
    'curl -u "$USER:$PASS" https://example.com',
    "Basic usage of the API is described below.",
    "Authorization: Bearer <token>",
    "msg.format(name)",
    "ports: 5432:5432",
    "var credential: URLCredential?",
    " *     password: string|null,",
    "'/token=myToken&user=myUser&message=test1'",
    "GLOBAL_TOKEN_IDENTIFIER = '!real_csrf_token'",
    '"next-auth": "npm:next-auth@^4.24.11",',
    '"Authorization": "Basic VXNlcm5hbWU6UGFzc3dvcmQ=",',  # base64 of Username:Password
    '<a class="token" href="#/s:9Alamofire7AdapterP">init</a>',
    '%{"foo" => "bar", "password" => "[FILTERED]"}',
    'csrf_token_query = "&_csrf_token=" <> encode(body)',
    'TestCredential(accessToken: "a\\(UUID().uuidString)",',
    "apiKey: process.env.NEXT_PUBLIC_SEARCH_API_KEY!, // required",
]


@pytest.mark.parametrize("text", MORE_NOT_SECRETS)
def test_look_alikes_of_the_new_shapes_are_left_alone(text: str):
    out, found = redact(text)
    assert out is text and found == []


def test_the_choke_point_redacts_every_field_of_a_chunk_and_its_file():
    """Signature, doc and decorators come from the parser (the file's bytes), not from the redacted text."""
    from localidx.records import Chunk, Endpoint, FileContext
    from localidx.safety.redact import scrub_chunks

    key = "sk_live_" + ALNUM[:24]
    chunk = Chunk(path="a.py", language="python", kind="function", start_line=1, end_line=3, text="ok",
                  signature=f'def connect(password="{ALNUM[:12]}9"):', doc=f"Use {GITHUB} for the bot.",
                  decorators=[f'@retry(api_key="{key}")'], calls=["connect"], tags={"http_path": f"/h/{AWS_KEY}"})
    ctx = FileContext(path="a.py", language="python", imports=[f"import x  # {JWT}"], module_doc=f"Key {AWS_KEY}.",
                      endpoints=[Endpoint("GET", f"/x/{AWS_KEY}")])
    scrub_chunks([chunk], ctx)
    everything = repr((chunk.signature, chunk.doc, chunk.decorators, chunk.tags, ctx.imports, ctx.module_doc,
                       ctx.endpoints))
    for secret in (ALNUM[:12] + "9", GITHUB, key, AWS_KEY, JWT):
        assert secret not in everything
    assert chunk.calls == ["connect"] and "def connect(password=" in chunk.signature


def test_log_records_are_redacted_before_a_handler_writes_them(tmp_path):
    import logging

    from localidx.safety.redact import LogFilter

    handler = logging.FileHandler(tmp_path / "x.log")
    handler.addFilter(LogFilter())
    logger = logging.getLogger("localidx.test_redact")
    logger.addHandler(handler)
    try:
        logger.warning("the LLM answered %s", f"HTTP 401: bad key {GITHUB}")
        try:
            raise ValueError(f"token {GITHUB}")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
        handler.close()
    text = (tmp_path / "x.log").read_text()
    assert GITHUB not in text and text.count("«redacted:github_token»") == 2  # the message and the exception


# -- shapes that had no "name = value" of their own, each made here from harmless pieces ---------------------------

PW = "Xk29dq" + "Lm77vQ4r"
HEX32 = "0123456789abcdef" * 2

NEW_SHAPES = [
    pytest.param("    client-key-data: LS0tLS1CRUdJ" + ALNUM, "LS0tLS1CRUdJ" + ALNUM, "private_key", id="kubeconfig"),
    pytest.param(f"define('DB_PASSWORD', '{PW}');", PW, "secret", id="php-define"),
    pytest.param("define( 'AUTH_KEY', 'a|K h0 :;[]Zx9 ~q!#' );", "a|K h0 :;[]Zx9 ~q!#", "secret", id="wp-salt"),
    pytest.param(f'dsn = "host=db port=5432 user=app password={PW}"', PW, "password", id="libpq"),
    pytest.param(f'String u = "jdbc:postgresql://db/app?user=app&password={PW}";', PW, "password", id="jdbc"),
    pytest.param(f'ds.setPassword("{PW}");', PW, "password", id="setter"),
    pytest.param(f'smtp_pw = "{PW}"', PW, "password", id="pw-name"),
    pytest.param(f'variable "db_password" {{\n  type = string\n  default = "{PW}"\n}}', PW, "password",
                 id="terraform-default"),
    pytest.param(f'TWILIO_ACCOUNT_SID = "A' + f'C{HEX32}"', "AC" + HEX32, "twilio_key", id="twilio-sid"),
    pytest.param(f'stripe.Webhook.construct_event(p, s, "wh' + f'sec_{ALNUM[:32]}")', "whsec_" + ALNUM[:32],
                 "stripe_key", id="whsec-positional"),
    pytest.param('Credential(t, c, "abc8' + 'Q~' + ALNUM[:34] + '")', "abc8Q~" + ALNUM[:34], "azure_key",
                 id="entra-client-secret"),
    pytest.param(f"curl -H 'X-Api-Key: {PW}{PW}' https://api.example.com", PW + PW, "api_key", id="curl-header"),
    pytest.param(f"machine api.example.com login deploy password {PW}", PW, "password", id="netrc-syntax"),
    pytest.param(f"db.internal:5432:app:deploy:{PW}", PW, "password", id="pgpass-syntax"),
]


@pytest.mark.parametrize(("text", "secret", "kind"), NEW_SHAPES)
def test_shapes_without_an_assignment_of_their_own_are_redacted(text: str, secret: str, kind: str):
    out, found = redact(text)
    assert secret not in out, out
    assert [r.kind for r in found] == [kind]
    assert out.count("\n") == text.count("\n")


NEW_NOT_SECRETS = [
    'variable "region" {\n  default = "eu-west-1a9Zx"\n}',  # a default, but not of a secret's variable
    "default = 'Xk29dqLm77vQ4r'",  # no Terraform variable around it
    "The machine password is stored in a vault.",
    "define('DB_NAME', 'wordpress_db9');",
    "define('AUTH_KEY', 'put your unique phrase here');",
    "mysql -u root -p app; echo -pX9kq2Lm",  # the -p after the command's end is not mysql's
    "bypw = 'Xk29dqLm77vQ4r'",
]


@pytest.mark.parametrize("text", NEW_NOT_SECRETS)
def test_look_alikes_of_the_shapes_without_an_assignment_are_left_alone(text: str):
    out, found = redact(text)
    assert out is text and found == []


@pytest.mark.parametrize("line", [
    pytest.param("TOKEN_" * 4000, id="secret-name-fragments"),  # was cubic: 47 s at 3,000 characters
    pytest.param("mysql " * 8000 + "-p", id="mysql-words"),  # was quadratic
    pytest.param("curl " * 5000 + "-u", id="curl-words"),
    pytest.param("eyJ" * 30000, id="jwt-prefixes"),
    pytest.param("token: a" + " " * 48000 + ")", id="annotation-blanks"),
    pytest.param("token:" * 4000, id="values-in-values"),
    pytest.param('x_token="' * 3000, id="dense-assignments"),
])
def test_crafted_lines_cost_linear_time(line: str):
    """Each took from seconds to hours before (backtracking); linear, they take milliseconds. The bound is loose
    enough for a loaded machine and far below what any super-linear pattern would need at these lengths."""
    import time

    started = time.process_time()
    redact(line)
    redact(line + "\n" + line[: len(line) // 2])
    assert time.process_time() - started < 2.0


def test_a_deadline_stops_redaction_with_an_error_not_a_partial_text():
    from localidx.safety.secret_scan import RedactionTimeout

    with pytest.raises(RedactionTimeout):
        redact('x_token="abc"\n' * 50000, deadline=0.0)  # a monotonic clock is long past 0
    assert redact(f'token = "{ALNUM}"', deadline=None)[1]


def test_a_path_holding_a_token_is_a_secret_path_and_is_shown_redacted():
    from localidx.discover.files import secret_in_path, shown_path

    path = f"{GITHUB}/notes.py"
    assert secret_in_path(path) and GITHUB not in shown_path(path) and shown_path(path).endswith("/notes.py")
    assert not any(secret_in_path(p) for p in ("src/auth/token.py", "docs/password-reset.md", "a/b.py",
                                               "secrets/README.md", "keys/api_key_test.go"))


DENSE_VALUE = "Qz8" + "wK3vR7"  # assembled at run time, like every fake secret here


@pytest.mark.parametrize("unit", [
    pytest.param("x_passwords ", id="names"),
    pytest.param('api_key="', id="names-opening-values"),
    pytest.param("mariadb -p", id="command-passwords"),
    pytest.param(f'x_password = "{DENSE_VALUE}"; ', id="names-with-values"),
    pytest.param(f"PW={DENSE_VALUE}&", id="short-names-with-values"),
])
@pytest.mark.parametrize("func", [redact, redact_env], ids=["redact", "redact_env"])
def test_a_line_dense_with_secret_names_goes_whole_and_fast(unit: str, func):
    """A 100 KB line made of secret names (a name every 6 to 30 characters, as no person writes) is replaced whole
    by one marker, without reading each name (which ran at under 1 MB/s); the lines around it are untouched."""
    import time

    line = (unit * (100_000 // len(unit) + 1))[:100_000]
    text = f"before = 1\n{line}\r\nafter = 2  # the password is rotated\n"
    started = time.process_time()
    out, found = func(text)
    assert time.process_time() - started < 0.5  # about 0.02 s on one core
    assert DENSE_VALUE not in out
    assert out.splitlines() == ["before = 1", out.splitlines()[1], "after = 2  # the password is rotated"]
    assert len(out) < 200 and out.count("\n") == text.count("\n") and "\r\n" in out
    if func is redact:
        assert out.splitlines()[1] == "«redacted:dense-secrets»"
        assert [(r.kind, r.line) for r in found] == [("dense-secrets", 2)]
    else:  # a .env line whose key looks secret loses its whole value, as any other; else the line goes whole
        assert out.splitlines()[1] in ("«redacted:dense-secrets»", "x_password = «redacted:password»",
                                       "api_key=«redacted:api_key»", "PW=«redacted:password»")


def test_a_line_with_a_few_secrets_keeps_its_other_text():
    line = (f'connect(user="deploy", password="{DENSE_VALUE}", host="db.internal", api_key="{DENSE_VALUE}9", '
            "retries=3, timeout=30)  # the nightly job's account")
    out, found = redact(line)
    assert DENSE_VALUE not in out
    assert out == ('connect(user="deploy", password="«redacted:password»", host="db.internal", '
                   'api_key="«redacted:api_key»", retries=3, timeout=30)  # the nightly job\'s account')
    assert [r.kind for r in found] == ["password", "api_key"]


def test_a_long_env_value_is_read_once_and_its_comment_kept():
    import time

    value = DENSE_VALUE * 12_000
    text = f"API_TOKEN={value}   # rotated monthly\nDEBUG=true\n"
    started = time.process_time()
    out, found = redact_env(text)
    assert time.process_time() - started < 0.5
    assert out == "API_TOKEN=«redacted:token»   # rotated monthly\nDEBUG=true\n"
    assert [(r.kind, r.line) for r in found] == [("token", 1)]


def test_a_long_env_file_of_secrets_costs_linear_time():
    """Naming each value by the secret found inside it scanned every finding per line: seconds for these 10,000
    lines, a tenth of that now."""
    import time

    text = "".join(f'X_PASSWORD_{n} = "{DENSE_VALUE}{n}"\nKEY_{n}={AWS_KEY}\n' for n in range(5000))
    started = time.process_time()
    out, found = redact_env(text)
    assert time.process_time() - started < 1.5
    assert DENSE_VALUE not in out and AWS_KEY not in out and out.count("\n") == 10000
    assert [r.kind for r in found[:2]] == ["password", "aws_access_key"] and len(found) == 10000


def test_a_row_of_links_is_not_a_dense_line():
    """A README's row of badges holds a "://" every 60 characters; URLs count a quarter of a name towards a dense
    line (a name costs far more to read), so the row stays as written."""
    row = "[![Build](https://ci.example.org/org/project/badge.svg)](https://ci.example.org/org/project) " * 12
    assert redact(row) == (row, [])
