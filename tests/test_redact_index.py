"""No secret is stored or served, in any field: real repositories indexed by the real CLI, every answer a program
reads (``search --json``, ``context --json``, ``chunks --json``) and every byte the index keeps on disk (the LanceDB
files, the catalog, the caches, the logs) checked for the secrets of ``tests/secret_shapes.py``. Beside the secrets
sit ordinary canary words: the same checks find those, so they could have found a secret.

Also: a secret taken out of a file leaves the disk with ``localidx index --rebuild``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git
from secret_shapes import make_repository_files

# Code whose secrets reach fields the chunk text is not: a signature's default, a docstring, a decorator, a summary
# (five symbols or more), an import with credentials in its URL, a module docstring.
FIELDS_MODULE = '''"""Deploys the app; the CI bot's token is {gh}."""
import requests
from internal.client import Client  # fetched from https://deploy:{pw}@pkgs.example.com/simple

__all__ = ["connect", "notify", "fetch", "push", "pull"]


def connect(host, password="{pw}"):
    """Connect to the host, retrying a refused connection three times before giving up on it."""
    for attempt in range(3):
        try:
            return Client(host, password, timeout=10 * (attempt + 1))
        except ConnectionRefusedError:
            continue
    raise ConnectionError(host)


@retry(api_key="{stripe}")
def notify(message):
    """Send a message to the operators' channel; the staging key is {aws}."""
    payload = {{"text": message, "channel": "#ops", "username": "deploy-bot", "icon": ":rocket:"}}
    response = requests.post("https://chat.example.com/api/post", json=payload, timeout=10)
    response.raise_for_status()
    return response.json()


def fetch(url):
    return requests.get(url)


def push(item):
    return item


def pull(item):
    return item
'''


def _values(rng_seed: int = 7) -> dict[str, str]:
    import random
    import string

    rng = random.Random(rng_seed)
    draw = lambda alphabet, n: "".join(rng.choice(alphabet) for _ in range(n))  # noqa: E731
    alnum = string.ascii_letters + string.digits
    return {"gh": "gh" + "p_" + draw(alnum, 35) + "7", "pw": "Q" + draw(alnum, 12) + "9x",
            "stripe": "sk_" + "live_" + draw(alnum, 23) + "1", "aws": "AKIA" + draw(string.ascii_uppercase, 15) + "7"}


def _lx(root: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "localidx", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    return proc


def _disk(state: Path) -> bytes:
    """Every byte under the index's state dir (LanceDB data and index files, catalogs, caches, logs)."""
    return b"".join(p.read_bytes() for p in sorted(state.rglob("*")) if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    base = tmp_path_factory.mktemp("redact-index")
    files, secrets, canaries = make_repository_files(seed=3, per_place=1)
    values = _values()
    files["app/deploy.py"] = FIELDS_MODULE.format(**values)
    root = base / "repo"
    root.mkdir()
    git(root, "init", "-q")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    env = {k: v for k, v in os.environ.items() if k not in ("LOCALIDX_SOCK", "LOCALIDX_DEBUG")}
    env.update({"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(base / "state"), "LOCALIDX_WATCH": "0",
                "LOCALIDX_INCLUDE_SECRET_FILES": "1", "LOCALIDX_REGISTRY": str(base / "registry.json"),
                "LOCALIDX_CONFIG_DIR": str(base / "config")})
    proc = _lx(root, env, "index")
    assert proc.returncode == 0, proc.stderr
    probes = [p for s in secrets for p in s.probes] + list(values.values())
    return root, env, base / "state", probes, canaries, secrets


def test_every_secret_shape_is_in_the_index_redacted_in_every_field(indexed):
    root, env, state, probes, canaries, secrets = indexed
    assert len({s.shape for s in secrets}) >= 40 and len({s.kind for s in secrets}) >= 10
    answers = []
    for query in ("password token key secret", "connect password", "notify retry api_key", "deploy bot token",
                  "AccountKey storage", "Authorization Basic Bearer curl", "mysql sshpass", "webhook slack",
                  "PuTTY Private-Lines", "RSA PRIVATE KEY",
                  "define AUTH_KEY DB_PASSWORD variable default", "machine login password setPassword jdbc",
                  "client-key-data connect credential deploy",
                  *canaries):
        answers.append(_lx(root, env, "search", query, "--json", "-k", "100").stdout)
        answers.append(_lx(root, env, "context", query, "--json").stdout)
    chunked = _lx(root, env, "chunks", "--json", "app/deploy.py", "app/settings.py", ".env", "keys/deploy0.ppk",
                  "site/config.php", "src/Db.java", "infra/variables.tf", "ops/hosts.txt", "deploy/config.yaml")
    answers.append(chunked.stdout)
    served = "\n".join(answers)
    stored = _disk(state)
    for probe in probes:
        assert probe not in served, f"served: {probe}"
        assert probe.encode() not in stored, f"stored: {probe}"
    # The checks can see: the canaries beside the secrets are both served and stored, and so are the fields the
    # secrets were in (a signature, a docstring, a decorator, the summary).
    for canary in canaries:
        assert canary in served and canary.encode() in stored, canary
    records = {r["symbol"]: r for r in json.loads(chunked.stdout) if r["path"] == "app/deploy.py"}
    assert records["connect"]["signature"].startswith('def connect(host, password="«redacted:')
    assert "«redacted:aws_access_key»" in records["notify"]["doc"]
    assert records["notify"]["decorators"] and "«redacted:stripe_key»" in records["notify"]["decorators"][0]
    assert b"def connect(host, password=" in stored and b"@retry(api_key=" in stored


def test_a_secret_taken_out_of_a_file_leaves_the_disk_with_a_rebuild(indexed, tmp_path):
    """Removed text (not a secret shape: what redaction missed) is in no file of the index after --rebuild."""
    _root, env, _state, _probes, _canaries, _secrets = indexed
    root = tmp_path / "small"
    root.mkdir()
    git(root, "init", "-q")
    removed = "leakedInternalHostnameXq7"
    (root / "a.py").write_text(f'def host():\n    return "{removed}"\n\n\ndef other():\n    return 2\n')
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a")
    env = {**env, "LOCALIDX_HOME": str(tmp_path / "state")}
    assert _lx(root, env, "index", "-q").returncode == 0
    assert removed.encode() in _disk(tmp_path / "state")  # the check can see it
    (root / "a.py").write_text("def host():\n    return 'db.internal'\n\n\ndef other():\n    return 2\n")
    assert _lx(root, env, "index", "-q").returncode == 0
    # An older version may still hold it (until no reader is on it and compaction drops it): --rebuild takes it off.
    assert _lx(root, env, "index", "-q", "--rebuild").returncode == 0
    assert removed.encode() not in _disk(tmp_path / "state")
    found = _lx(root, env, "search", "db.internal", "--json")
    assert "a.py" in found.stdout  # the index still answers


GH = "gh" + "p_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A7c"  # assembled here: no scanner flags this file


def test_crafted_lines_secret_files_and_secret_paths_in_a_real_index(tmp_path):
    """What a reviewer found, through ``localidx index`` on a real repository: a line of secret-name fragments
    (cubic before: 47 s at 3,000 characters, hours at this length) is indexed at once with its token redacted; files
    that hold credentials by their name are skipped and listed; a directory named after a token keeps the token out
    of every answer and every byte of the index, through an incremental update too."""
    import time

    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    # Short lines around the crafted ones, or the file would be skipped as minified.
    notes = "".join(f"note {n}\n" for n in range(300))
    (root / "dense.txt").write_text(notes + "TOKEN_" * 3000 + f" {GH}\n" + "x_token=abc " * 2000 + "\n" + notes)
    (root / "app.py").write_text("def canaryPelican():\n    return 'canaryPelican'\n")
    secret_names = [".envrc", "kubeconfig", "wp-config.php", "prod.tfvars", "netrc", "pgpass.txt"]
    for name in secret_names:
        (root / name).write_text(f"canaryHeron = 1  # {name}\n")
    (root / GH).mkdir()
    (root / GH / "notes.py").write_text("def canaryIbis():\n    return 'canaryIbis'\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCALIDX_")}
    env.update({"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / "state"), "LOCALIDX_WATCH": "0",
                "LOCALIDX_REGISTRY": str(tmp_path / "registry.json"), "LOCALIDX_CONFIG_DIR": str(tmp_path / "cfg"),
                "LOCALIDX_DAEMON": "never"})  # its searches must not leave a daemon behind the test
    dry = _lx(root, env, "index", "--dry-run")
    for name in secret_names:
        assert f"{name}  (secret-file)" in dry.stdout, dry.stdout
    assert "«redacted:github_token»/notes.py  (secret-in-path)" in dry.stdout and GH not in dry.stdout + dry.stderr
    started = time.monotonic()
    first = _lx(root, env, "index")
    assert first.returncode == 0, first.stderr
    assert time.monotonic() - started < 120  # the crafted line alone took hours before
    (root / GH / "notes.py").write_text("def canaryIbis():\n    return 'canaryIbis changed'\n")
    (root / "app.py").write_text("def canaryPelican():\n    return 'canaryPelican changed'\n")
    assert _lx(root, env, "index").returncode == 0  # an incremental update with the secret path still there
    served = "\n".join(_lx(root, env, *args).stdout for args in (
        ("search", "TOKEN", "--json", "-k", "50"), ("search", "Ibis notes", "--json"),
        ("search", "Heron", "--json"), ("search", "Pelican changed", "--json"),
        ("context", "notes Ibis TOKEN", "--json"), ("status", "--json")))
    stored = _disk(tmp_path / "state")
    assert GH not in served and GH.encode() not in stored
    assert "canaryHeron" not in served and b"canaryHeron" not in stored  # the secret files' text
    assert "canaryIbis" not in served and b"canaryIbis" not in stored  # the file under the token's directory
    assert "notes.py" not in served
    # The checks can see: the other files are there, the crafted one redacted and searchable.
    assert "canaryPelican changed" in served and b"canaryPelican changed" in stored
    # The line of secret-name fragments holds a name every 6 characters: it goes whole, with the token on it.
    assert "«redacted:dense-secrets»" in served and "dense.txt" in served


def test_a_file_whose_redaction_overruns_the_bound_is_an_error_chunk_without_its_text(tmp_path):
    """The parse timeout bounds redaction too: past it the file is indexed as an error chunk with the reason, the
    problem the catalog records for any file, and none of its text (it may hold a secret redaction did not reach)."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    secret = "Q" + "x9Lm2Wd7Kp4Zr8Tn"
    (root / "slow.txt").write_text("".join(f'x_token="{secret}{n}"\n' for n in range(20000)))
    (root / "fine.py").write_text("def canaryStork():\n    return 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCALIDX_")}
    env.update({"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / "state"), "LOCALIDX_WATCH": "0",
                "LOCALIDX_REGISTRY": str(tmp_path / "registry.json"), "LOCALIDX_CONFIG_DIR": str(tmp_path / "cfg"),
                "LOCALIDX_PARSE_TIMEOUT_S": "0.001", "LOCALIDX_DAEMON": "never"})  # no daemon outlives the test
    proc = _lx(root, env, "index")
    assert proc.returncode == 0, proc.stderr
    chunks = json.loads(_lx(root, env, "chunks", "--json", "slow.txt").stdout or "[]")
    status = _lx(root, env, "status", "--json").stdout
    found = _lx(root, env, "search", "slow redaction", "--json", "-k", "20").stdout
    assert "redaction took over 0.001 s" in status, status
    assert [c["kind"] for c in chunks if c["path"] == "slow.txt"] in ([], ["error"])
    assert "slow.txt" in found and "redaction took over" in found
    stored = _disk(tmp_path / "state")
    assert secret not in found and secret.encode() not in stored
    assert b"canaryStork" in stored  # the check can see what was indexed
