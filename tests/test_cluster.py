"""The cluster job (``localidx cluster index``): three real git repositories indexed by Ray Data on a local Ray
instance (``ray.init(num_cpus=2)``) into a shared database in a temp dir, checked against three local indexes of the
same commits; and a laptop reading that database beside its own index.

The Ray tests are skipped when the ``cluster`` extra is not installed; the manifest tests always run.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import AUTH_MODULE, AUTH_README, BILLING_MODULE, git, init_repo
from localidx.cluster.manifest import RepoSpec, default_name, has_credential, identity, load_manifest, redact_url
from localidx.errors import UsageError

HAVE_CLUSTER = all(importlib.util.find_spec(name) for name in ("ray", "lance", "lance_ray"))
needs_cluster = pytest.mark.skipif(not HAVE_CLUSTER, reason="the cluster extra is not installed")

SECRET = "zq-SECRET-4f1c9e2b-never-print-me"
SHARED_NOTICE = "Copyright Acme Corp. Licensed under the Apache License, Version 2.0. See LICENSE for details.\n"

REPOS = {
    "alpha": {
        "src/billing.py": BILLING_MODULE,
        "README.md": "# Alpha\n\nInvoices and ledgers.\n\n## Ledger\n\nCredits and debits per account.\n",
        "config/app.yaml": "server:\n  port: 8080\n  host: localhost\ndatabase:\n  url: postgres://db/alpha\n",
        "NOTICE": SHARED_NOTICE,
        "logo.bin": b"\x89PNG\0\0binary",
    },
    "beta": {
        "auth/tokens.py": AUTH_MODULE,
        "README.md": AUTH_README,
        "NOTICE": SHARED_NOTICE,
    },
    "gamma": {
        "lib/shipping.go": ("package shipping\n\n// Quote returns the shipping cost of a parcel.\nfunc Quote(weight int, "
                            "zone string) int {\n\tif zone == \"eu\" {\n\t\treturn weight * 3\n\t}\n\treturn weight * 5\n}\n"),
        "NOTICE": SHARED_NOTICE,
        ".localidx.toml": "max_tokens = 128\n",
    },
}


# -- the manifest (no Ray needed) ----------------------------------------------------------------------------------


def test_manifest_names_refs_and_identities(tmp_path):
    (tmp_path / "org.toml").write_text(
        '[defaults]\nref = "main"\n\n'
        '[[repo]]\nurl = "git@github.com:Acme/Payments.git"\n\n'
        '[[repo]]\nurl = "https://github.com/acme/ledger"\nname = "books"\nref = "v2"\n\n'
        '[[repo]]\npath = "repos/tools"\n', encoding="utf-8")
    specs = load_manifest(tmp_path / "org.toml")
    assert [(s.name, s.ref) for s in specs] == [("Payments", "main"), ("books", "v2"), ("tools", "main")]
    assert specs[2].url == str((tmp_path / "repos" / "tools").resolve())
    # One repository, however its URL is written; a path is its resolved self.
    assert identity("git@github.com:Acme/Payments.git") == identity("https://github.com/acme/payments") \
        == identity("ssh://git@github.com/acme/payments.git/") == "github.com/acme/payments"
    assert identity(str(tmp_path / "repos" / ".." / "repos" / "tools")) == specs[2].identity
    assert default_name("/srv/git/ledger.git") == "ledger"


def test_a_manifest_with_a_credential_is_refused_without_printing_it(tmp_path):
    manifest = tmp_path / "org.toml"
    for url in (f"https://ci:{SECRET}@github.com/acme/x.git", f"https://{SECRET}@github.com/acme/x.git"):
        manifest.write_text(f'[[repo]]\nurl = "{url}"\n', encoding="utf-8")
        with pytest.raises(UsageError) as err:
            load_manifest(manifest)
        assert SECRET not in str(err.value) and "credential" in str(err.value)
        assert "github.com/acme/x.git" in str(err.value)
    assert not has_credential("ssh://git@github.com/acme/x.git") and not has_credential("git@github.com:a/b")
    assert redact_url(f"https://ci:{SECRET}@example.com:8443/x.git?token={SECRET}") == "https://example.com:8443/x.git"
    assert redact_url(f"s3://bucket/org?sig={SECRET}") == "s3://bucket/org"


@pytest.mark.parametrize("text, message", [
    ("", "no [[repo]]"),
    ('[[repo]]\nname = "x"\n', "has no url"),
    ('[[repo]]\nurl = "/a/x"\n[[repo]]\nurl = "/b/x"\n', "two repositories are named 'x'"),
    ('[[repo]]\nurl = "/a/x"\nbranch = "main"\n', "unknown key 'branch'"),
    ('[[repo]]\nurl = "/a/x"\nref = "--upload-pack=evil"\n', "is not a branch"),
    ('[[repo]]\nurl = "--upload-pack=evil"\nname = "x"\n', "is not a URL or a path"),
])
def test_manifest_mistakes_are_one_line(tmp_path, text, message):
    (tmp_path / "org.toml").write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match="^.*" + message.replace("[", r"\[").replace("]", r"\]")):
        load_manifest(tmp_path / "org.toml")


# -- the job on a local Ray instance ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_local():
    if not HAVE_CLUSTER:
        pytest.skip("the cluster extra is not installed")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def make_org(base: Path) -> dict[str, Path]:
    return {name: init_repo(base / name, files) for name, files in REPOS.items()}


def manifest_for(repos: dict[str, Path]) -> list[RepoSpec]:
    return [RepoSpec(name=name, url=str(root), ref="main" if name != "beta" else "HEAD")
            for name, root in repos.items()]


def run(specs, uri: Path, clones: Path, **options):
    from localidx.cluster.pipeline import run_job

    return run_job(specs, str(uri), model="fake", clones=clones, **options)


def org_rows(uri: Path) -> dict[str, dict[str, dict]]:
    """{repo: {id: row}} of the shared chunk table."""
    import lancedb

    from localidx.cluster.shared import table_names
    from localidx.embed.fake import FakeEmbedder

    names = table_names(FakeEmbedder.model_id, FakeEmbedder.dim)
    rows = lancedb.connect(str(uri)).open_table(names.chunks).to_arrow().to_pylist()
    out: dict[str, dict[str, dict]] = {}
    for row in rows:
        repo = row.pop("repo")
        assert row["id"] not in out.setdefault(repo, {}), f"duplicate row {repo}:{row['id']}"
        out[repo][row["id"]] = row
    return out


def local_rows(root: Path, home: Path) -> dict[str, dict]:
    """{id: row} of a local index of the work tree at ``root`` (built now, in its own state dir)."""
    from localidx.config import load_settings
    from localidx.index.indexer import run_index
    from localidx.store.index import open_index

    settings = load_settings(root, {"embed_model": "fake", "home": str(home)}, env={})
    stats = run_index(root, True, settings)
    assert stats.chunks_pending == 0
    index = open_index(root, True, settings, read_only=True)
    try:
        return {r["id"]: r for r in index.store.snapshot().to_arrow().to_pylist()}
    finally:
        index.close()


def assert_same_rows(org: dict[str, dict], local: dict[str, dict]) -> None:
    assert set(org) == set(local)
    for chunk_id, want in local.items():
        got = org[chunk_id]
        for column, value in want.items():
            if column == "vector":
                np.testing.assert_allclose(got["vector"], value, atol=1e-6)
            else:
                assert got[column] == value, f"{want['path']} {chunk_id} {column}"


@pytest.fixture(scope="module")
def org(ray_local, tmp_path_factory):
    """Three repositories indexed once into a shared database (read by several tests, changed by none)."""
    base = tmp_path_factory.mktemp("org")
    repos = make_org(base / "repos")
    uri = base / "shared"
    stats = run(manifest_for(repos), uri, base / "clones", workers=2)
    return {"repos": repos, "uri": uri, "stats": stats, "base": base}


@needs_cluster
def test_the_cluster_index_equals_three_local_indexes(org, tmp_path):
    stats = org["stats"]
    assert stats.repos == 3 and stats.repos_changed == 3 and not stats.repos_failed
    shared = org_rows(org["uri"])
    assert set(shared) == {"alpha", "beta", "gamma"}
    for name, root in org["repos"].items():
        assert_same_rows(shared[name], local_rows(root, tmp_path / f"{name}-index"))
    assert stats.chunks_written == sum(len(rows) for rows in shared.values())
    # The identical NOTICE of three repositories is one text: its key is embedded at most once per batch, and every
    # key at least once.
    keys = {row["embed_key"] for rows in shared.values() for row in rows.values()}
    assert len(keys) <= stats.chunks_embedded < stats.chunks_written
    assert "logo.bin" not in {row["path"] for row in shared["alpha"].values()}  # binary: skipped as locally
    assert "full-text index over" in " ".join(stats.indexes_built)


@needs_cluster
def test_status_lists_repositories_commits_and_counts(org):
    from localidx.retrieve.shared_index import status

    report = status(str(org["uri"]))
    (entry,) = report["sets"]
    by_name = {r["repo"]: r for r in entry["repos"]}
    assert set(by_name) == {"alpha", "beta", "gamma"}
    head = git(org["repos"]["alpha"], "rev-parse", "HEAD").strip()
    assert by_name["alpha"]["commit"] == head and by_name["alpha"]["status"] == "ok"
    assert by_name["gamma"]["ref"] == "main" and by_name["beta"]["ref"] == "HEAD"
    assert entry["chunks"] == sum(r["chunks"] for r in entry["repos"])
    assert by_name["alpha"]["files"] == 4  # the binary logo is skipped


@needs_cluster
def test_a_rerun_after_a_commit_embeds_only_the_changed_chunks(ray_local, tmp_path):
    repos = make_org(tmp_path / "repos")
    uri, clones = tmp_path / "shared", tmp_path / "clones"
    specs = manifest_for(repos)
    run(specs, uri, clones)
    before = org_rows(uri)

    alpha = repos["alpha"]
    source = (alpha / "src/billing.py").read_text(encoding="utf-8")
    (alpha / "src/billing.py").write_text(source.replace("raise ValueError(\"insufficient funds\")",
                                                         "raise LedgerError(\"overdrawn account\")"), encoding="utf-8")
    (alpha / "src/refunds.py").write_text("def refund_invoice(invoice):\n    return -invoice_total(invoice.lines)\n",
                                          encoding="utf-8")
    (alpha / "config/app.yaml").unlink()
    git(alpha, "add", "-A")
    git(alpha, "commit", "-q", "-m", "refunds")

    second = run(specs, uri, clones)
    after = org_rows(uri)
    assert second.repos_changed == 1 and second.files_deleted == 1
    assert second.files_processed == 2  # billing.py and refunds.py; everything else was compared and left alone
    old_keys = {row["embed_key"] for rows in before.values() for row in rows.values()}
    new_keys = {row["embed_key"] for row in after["alpha"].values()} - old_keys
    assert 0 < second.chunks_embedded == len(new_keys)
    assert second.chunks_reused == second.chunks_written - second.chunks_embedded
    assert after["beta"] == before["beta"] and after["gamma"] == before["gamma"]
    assert_same_rows(after["alpha"], local_rows(alpha, tmp_path / "alpha-index"))

    # Nothing changed in alpha and beta; gamma left the manifest and --prune removes it.
    third = run(specs[:2], uri, clones, prune=True)
    assert (third.repos_changed, third.chunks_written, third.chunks_embedded) == (0, 0, 0)
    assert third.repos_pruned == ["gamma"] and third.chunks_deleted == len(after["gamma"])
    assert org_rows(uri) == {"alpha": after["alpha"], "beta": after["beta"]}
    from localidx.retrieve.shared_index import status

    assert [r["repo"] for r in status(str(uri))["sets"][0]["repos"]] == ["alpha", "beta"]


@needs_cluster
@pytest.mark.parametrize("stage", ["embed", "write"])
def test_a_worker_killed_mid_job_leaves_no_duplicate_or_missing_rows(org, tmp_path, monkeypatch, stage):
    from localidx.cluster.stages import FAULT_ENV

    monkeypatch.setenv(FAULT_ENV, f"{stage}:{tmp_path}")
    stats = run(manifest_for(org["repos"]), tmp_path / "shared", org["base"] / "clones")
    assert (tmp_path / f"killed-{stage}").exists()  # a worker did die, and Ray retried its task
    assert not stats.repos_failed
    got, want = org_rows(tmp_path / "shared"), org_rows(org["uri"])  # org_rows asserts no duplicate
    assert {r: set(rows) for r, rows in got.items()} == {r: set(rows) for r, rows in want.items()}
    assert stats.chunks_written == sum(len(rows) for rows in want.values())


# -- a laptop reading the shared index -----------------------------------------------------------------------------


def localidx(*args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=180, env=env)


@needs_cluster
def test_a_laptop_reads_the_shared_index_and_prefers_its_own_work_tree(org, tmp_path, monkeypatch):
    from localidx.config import load_settings
    from localidx.index.indexer import run_index

    laptop = tmp_path / "laptop" / "alpha"
    git(tmp_path, "clone", "-q", str(org["repos"]["alpha"]), str(laptop))
    billing = laptop / "src/billing.py"
    # A fresh, uncommitted edit: the org index has the old text of this function.
    billing.write_text(billing.read_text(encoding="utf-8").replace("Sum the lines of an invoice.",
                                                                   "Sum the lines of an invoice, refunds included."),
                       encoding="utf-8")
    run_index(laptop, True, load_settings(laptop, {"embed_model": "fake", "home": str(tmp_path / "laptop-index")}))
    env = {**os.environ, "LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_SHARED_INDEX": str(org["uri"])}
    assert localidx("repos", "share", ".", cwd=laptop, env=env).returncode == 0  # --all-repos reads shared ones only

    proc = localidx("search", "--all-repos", "--json", "-k", "20", "invoice total refunds", cwd=laptop, env=env)
    assert proc.returncode == 0, proc.stderr
    matches = json.loads(proc.stdout)["matches"]
    invoice = [m for m in matches if m["symbol"] == "invoice_total"]
    assert [(m["repo"], m["index"]) for m in invoice] == [("alpha", "local")]
    assert "refunds included" in invoice[0]["text"] and not invoice[0]["stale"]
    assert not [m for m in matches if m["repo"].startswith("alpha@")]  # the org's copy of alpha is left out

    proc = localidx("search", "--all-repos", "--json", "verify token secret", cwd=laptop, env=env)
    assert proc.returncode == 0, proc.stderr
    matches = json.loads(proc.stdout)["matches"]
    assert (matches[0]["repo"], matches[0]["index"], matches[0]["stale"]) == ("beta@shared", "shared", False)
    assert "auth/tokens.py" in {m["path"] for m in matches if m["repo"] == "beta@shared"}

    proc = localidx("context", "--all-repos", "--json", "how is a session token verified?", cwd=laptop, env=env)
    assert proc.returncode == 0, proc.stderr
    pack = json.loads(proc.stdout)
    assert {(m["repo"], m["index"]) for m in pack["matches"]} >= {("beta@shared", "shared")}
    assert "beta@shared:auth/tokens.py:" in pack["augmentedPrompt"]
    assert "alpha@shared" not in pack["augmentedPrompt"]

    # The same NOTICE text (the same chunk id) in all three: one match per repository, alpha's from the laptop.
    proc = localidx("search", "--all-repos", "--json", "Apache License copyright Acme", cwd=laptop, env=env)
    assert proc.returncode == 0, proc.stderr
    notices = [(m["repo"], m["path"]) for m in json.loads(proc.stdout)["matches"] if m["path"] == "NOTICE"]
    assert sorted(notices) == [("alpha", "NOTICE"), ("beta@shared", "NOTICE"), ("gamma@shared", "NOTICE")]

    # MCP's rag_search_global, in process, as an editor's assistant calls it from the laptop's work tree.
    import mcp

    from localidx.interface.mcp_server import create_server

    monkeypatch.setenv("LOCALIDX_SHARED_INDEX", str(org["uri"]))
    monkeypatch.setenv("LOCALIDX_EMBED_MODEL", "fake")

    async def ask():
        async with mcp.Client(create_server(laptop, True)) as client:
            result = await client.call_tool("rag_search_global", {"rawQuery": "shipping quote for a parcel zone"})
            assert not result.is_error
            return json.loads(result.content[0].text)

    found = asyncio.run(ask())
    assert found["matches"][0]["repo"] == "gamma@shared" and found["matches"][0]["index"] == "shared"


@needs_cluster
def test_an_unreadable_shared_index_costs_only_its_results(org, tmp_path):
    from localidx.config import load_settings
    from localidx.index.indexer import run_index

    laptop = init_repo(tmp_path / "mine", {"tool.py": "def shipping_label(parcel):\n    return parcel.address\n"})
    run_index(laptop, True, load_settings(laptop, {"embed_model": "fake", "home": str(tmp_path / "mine-index")}))
    env = {**os.environ, "LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_SHARED_INDEX": str(tmp_path / "nothing-here")}
    assert localidx("repos", "share", ".", cwd=laptop, env=env).returncode == 0  # --all-repos reads shared ones
    proc = localidx("search", "--all-repos", "--json", "shipping label", cwd=laptop, env=env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["matches"][0]["repo"] == "mine"
    assert [w for w in data["warnings"] if "shared index" in w], data["warnings"]  # --json: warnings in the JSON
    plain = localidx("search", "--all-repos", "shipping label", cwd=laptop, env=env)
    assert plain.returncode == 0 and "shared index" in plain.stderr and len(plain.stderr.strip().splitlines()) == 1


# -- credentials ------------------------------------------------------------------------------------------------------


@needs_cluster
def test_credentials_never_appear_in_output_logs_tables_or_status(org, tmp_path, monkeypatch, capfd):
    """Storage and git credentials live in the environment; a job and ``status`` print and store none of them."""
    import lancedb

    from localidx.interface.cli import main

    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AZURE_STORAGE_ACCOUNT_KEY",
                 "GOOGLE_SERVICE_ACCOUNT_KEY", "GIT_PASSWORD", "LOCALIDX_LLM_API_KEY"):
        monkeypatch.setenv(name, SECRET)
    monkeypatch.setenv("LOCALIDX_EMBED_MODEL", "fake")
    monkeypatch.setenv("LOCALIDX_DEBUG", "1")
    manifest = tmp_path / "org.toml"
    manifest.write_text(f'[[repo]]\npath = "{org["repos"]["beta"]}"\n\n'
                        '[[repo]]\nname = "offline"\nurl = "https://127.0.0.1:9/acme/offline.git"\n', encoding="utf-8")
    uri = tmp_path / "shared"
    outputs = []
    for argv in (["cluster", "index", str(manifest), "--to", str(uri), "--clones", str(tmp_path / "clones")],
                 ["cluster", "index", str(manifest), "--to", str(uri), "--clones", str(tmp_path / "clones"), "--json"],
                 ["cluster", "status", str(uri)], ["cluster", "status", str(uri), "--json"]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        out, err = capfd.readouterr()
        assert done.value.code == 0, err
        outputs.append(out + err)
    assert all(SECRET not in text for text in outputs)
    report = json.loads(outputs[3])
    offline = next(r for r in report["sets"][0]["repos"] if r["repo"] == "offline")
    assert offline["status"].startswith("failed: ") and offline["url"] == "https://127.0.0.1:9/acme/offline.git"
    assert "failed: offline:" in outputs[0]

    db = lancedb.connect(str(uri))
    for name in getattr(db.list_tables(), "tables", db.list_tables()):
        assert SECRET not in json.dumps(db.open_table(name).to_arrow().to_pylist(), default=str)
    import ray

    logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs"
    for path in logs.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
