"""What runs inside the Ray tasks and actors of a cluster job: checkout -> discover -> chunk -> embed -> write.

Place in the flow: the same steps as ``localidx.index.indexer``, with the library's own code doing each: ``discover``
lists
a repository's files, ``localidx.index.workers.read_file`` reads them, ``localidx.chunk.chunk_file`` chunks them, the
indexer's row builder gives each chunk its row ([META], ``bm25_text``, ``embed_key``), ``localidx.embed`` embeds what
the shared cache has never seen. So a repository's rows equal a local index's of the same commit. These functions
take and return plain rows and Arrow tables; ``localidx.cluster.pipeline`` wires them into Ray Data. Nothing here
imports Ray.

Rows travel as one *envelope* schema (``envelope_schema``): the shared chunk schema plus ``record`` (JSON, non-empty
on a row that is not a chunk: one per file — its catalog record — and one per repository — its plan), ``fresh``
(the vector was embedded by this job) and ``embedded`` (this row's text went through the model). Records ride along
with the chunks so that the driver learns every file's outcome from the same stream it commits.

``LOCALIDX_CLUSTER_FAULT=STAGE:DIR`` (tests only) kills the worker process once, at STAGE (``prepare``, ``chunk``,
``embed`` or ``write``; after its work, before it returns), the first time it runs with no marker in DIR: Ray then
retries the task, as it would after a node loss.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
from pathlib import Path

import pyarrow as pa

log = logging.getLogger(__name__)

FAULT_ENV = "LOCALIDX_CLUSTER_FAULT"


# -- the job's description, as the tasks receive it ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """What every task needs to know (small, pickled into each task)."""

    uri: str
    model: str  # the embedding model name (settings.embed_model)
    model_id: str
    dim: int
    chunks_table: str
    files_table: str
    cache_table: str
    files_version: int  # the files table as the job found it: every task compares against the same state
    cache_version: int
    clones: str  # where repositories are checked out, on each node
    chunks_uri: str = ""  # the chunk table's Lance dataset (fragments are written there)
    cache_uri: str = ""
    embed_threads: int = 1
    fault: str = ""


def envelope_schema(dim: int) -> pa.Schema:
    from localidx.cluster.shared import chunk_schema

    base = chunk_schema(dim)
    return pa.schema([*base, pa.field("record", pa.string()), pa.field("fresh", pa.bool_()),
                      pa.field("embedded", pa.bool_())])


PREPARED_SCHEMA = pa.schema([
    pa.field("repo", pa.string()), pa.field("path", pa.string()), pa.field("blob", pa.string()),
    pa.field("data", pa.binary()), pa.field("settings", pa.string()), pa.field("record", pa.string()),
])


def _fault_point(job: JobSpec, stage: str) -> None:
    if not job.fault:
        return
    wanted, _, marker_dir = job.fault.partition(":")
    if wanted != stage or not marker_dir:
        return
    marker = Path(marker_dir) / f"killed-{stage}"
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)


# -- stage 1: check out a repository, list its files, read the changed ones --------------------------------------


def _git(args: list[str], cwd: Path | None = None) -> str:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")  # a missing credential fails at once, never waits for a prompt
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"git {args[0]} failed")
    return done.stdout.strip()


def checkout(url: str, ref: str, clones: Path, slug: str) -> tuple[Path, str]:
    """A clean detached checkout of ``ref`` of the repository at ``url`` under ``clones`` (kept between jobs, so a
    re-run only fetches): ``(work tree, commit id)``."""
    import shutil

    target = clones / slug
    if not (target / ".git").is_dir():
        clones.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(target, ignore_errors=True)  # a clone killed half-way is cloned again
        partial = clones / f".{slug}.{os.getpid()}.tmp"
        shutil.rmtree(partial, ignore_errors=True)
        # Blobs are fetched when checked out, never the history's: a node holds each repository's current tree.
        _git(["clone", "--quiet", "--no-checkout", "--filter=blob:none", "--", url, str(partial)])
        os.replace(partial, target)
    # A checkout killed mid-way (a lost worker) leaves git's lock behind; one task at a time uses a clone.
    (target / ".git" / "index.lock").unlink(missing_ok=True)
    _git(["fetch", "--quiet", "--force", "--tags", "origin", "+refs/heads/*:refs/remotes/origin/*"], cwd=target)
    commit = ""
    for candidate in (f"refs/remotes/origin/{ref}", f"refs/tags/{ref}", ref):
        try:
            commit = _git(["rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}"], cwd=target)
            break
        except RuntimeError:
            continue
    if not commit:
        raise RuntimeError(f"no branch, tag or commit named {ref!r}")
    _git(["checkout", "--quiet", "--force", "--detach", commit], cwd=target)
    _git(["clean", "-qffdx"], cwd=target)
    return target, commit


def repo_settings(root: Path, model: str):
    """A repository's settings for the org index: its own config files (``.localidx.toml``, ``[tool.localidx]``) and
    the job's model; the submitting machine's ``LOCALIDX_*`` variables do not apply, and LLM explanations
    (``summarize``: an LLM call per chunk) are off."""
    from localidx.config import load_settings

    return load_settings(root, env={}, overrides={"embed_model": model}).replace(summarize=False, workers=1)


def prepare_repo(item: dict, job: JobSpec) -> list[dict]:
    """Stage 1 (one task per repository): check out, discover, read; one row per file whose content differs from the
    shared index's, then the repository's plan (commit, deleted paths, counts, or the failure). A failure costs this
    repository only: its plan says why and its rows stay as they are."""
    import hashlib

    import pygit2

    from localidx.cluster.manifest import redact_url
    from localidx.cluster.shared import SharedDB, known_files
    from localidx.discover import discover
    from localidx.index.workers import read_file

    name, url, ref = item["name"], item["url"], item["ref"]
    plan: dict = {"kind": "repo", "repo": name, "url": redact_url(url), "ref": ref, "commit": "", "error": "",
                  "changed": [], "gone": [], "seen": 0, "unchanged": 0, "skipped": {}}
    rows: list[dict] = []
    try:
        digest = hashlib.sha256(f"{url}\0{name}".encode()).hexdigest()[:12]
        slug = "".join(c if c.isalnum() else "_" for c in name)[:40] + f"-{digest}"
        root, plan["commit"] = checkout(url, ref, Path(job.clones), slug)
        settings = repo_settings(root, job.model)
        settings_json = json.dumps(dataclasses.asdict(settings))
        db = SharedDB(job.uri, job.model_id, job.dim)
        known = known_files(db, name, job.files_version)
        found = discover(root, settings)
        plan["seen"] = len(found.files) + len(found.skipped)
        for skipped in found.skipped:
            plan["skipped"][skipped.reason] = plan["skipped"].get(skipped.reason, 0) + 1
        listed = set()
        for f in found.files:
            read = read_file(str(f.abs_path), settings.max_file_bytes)
            if isinstance(read, str):
                plan["skipped"][read] = plan["skipped"].get(read, 0) + 1
                continue
            data = read[1]
            blob = str(pygit2.hash(data))
            listed.add(f.path)
            if f.path in known and known[f.path]["file_hash"] == blob:
                plan["unchanged"] += 1
                continue
            plan["changed"].append(f.path)
            rows.append({"repo": name, "path": f.path, "blob": blob, "data": data, "settings": settings_json,
                         "record": ""})
        plan["gone"] = sorted(set(known) - listed)
    except Exception as exc:  # noqa: BLE001 - one repository's failure is reported, never the job's
        reason = " ".join(str(exc).split()) or type(exc).__name__
        plan["error"] = reason.replace(url, redact_url(url))[:300]  # git echoes the URL it was given
        plan["changed"], plan["gone"] = [], []
        rows = []
    _fault_point(job, "prepare")
    rows.append({"repo": name, "path": "", "blob": "", "data": b"", "settings": "", "record": json.dumps(plan)})
    return rows


# -- stage 2: chunk (CPU tasks) --------------------------------------------------------------------------------------


def chunk_row(chunk, file_hash: str, model_id: str) -> dict:
    """A chunk's row, built by the indexer's own row builder (private today; to be switched to its public name)."""
    from localidx.index import indexer

    return indexer._row(chunk, file_hash, model_id)


def file_rows(path: str, data: bytes, blob: str, settings, model_id: str) -> tuple[list[dict], object, list]:
    """``(rows, FileChunks, problems)`` for one file, as the local indexer makes them: the chunker's result, and when
    building a row fails ([META], the embedding key), the file as an error chunk and line windows instead."""
    from localidx.chunk import chunk_file, unparsed_file

    result = chunk_file(path, data, settings)
    problems: list = []
    if result.skipped:
        return [], result, problems
    try:
        return [chunk_row(c, blob, model_id) for c in result.chunks], result, problems
    except Exception as exc:  # noqa: BLE001 - a failure costs its file only
        reason = f"enrich failed: {type(exc).__name__}: {exc}".splitlines()[0][:300]
        problems.append({"stage": "enrich", "reason": reason})
        result = unparsed_file(path, data, settings, reason)
        try:
            return [chunk_row(c, blob, model_id) for c in result.chunks], result, problems
        except Exception as exc2:  # noqa: BLE001
            problems.append({"stage": "enrich", "reason": f"{type(exc2).__name__}: {exc2}".splitlines()[0][:300]})
            result.chunks = []
            result.skipped = "failed"
            return [], result, problems


def _blank(repo: str, record: str) -> dict:
    return {"repo": repo, "id": "", "record": record, "fresh": False, "embedded": False}


def chunk_batch(batch: pa.Table, job: JobSpec) -> pa.Table:
    """Stage 2: the files of ``batch`` chunked into envelope rows; plans pass through."""
    from localidx.config import Settings

    out: list[dict] = []
    settings_cache: dict[str, Settings] = {}
    for item in batch.to_pylist():
        if item["record"]:
            out.append(_blank(item["repo"], item["record"]))
            continue
        raw = item["settings"]
        if raw not in settings_cache:
            settings_cache[raw] = Settings(**json.loads(raw))
        rows, result, problems = file_rows(item["path"], item["data"], item["blob"], settings_cache[raw],
                                           job.model_id)
        for row in rows:
            out.append({**row, "repo": item["repo"], "record": "", "fresh": False, "embedded": False})
        record = {"kind": "file", "repo": item["repo"], "path": item["path"], "file_hash": item["blob"],
                  "language": result.language or "", "chunk_ids": [r["id"] for r in rows],
                  "skipped": result.skipped or "", "problems": json.dumps(problems), "errors": result.errors}
        out.append(_blank(item["repo"], json.dumps(record)))
    _fault_point(job, "chunk")
    return pa.Table.from_pylist(out, schema=envelope_schema(job.dim))


# -- stage 3: embed (actors holding the model) ------------------------------------------------------------------


class Embed:
    """Stage 3, one per actor: the model, loaded once, and the shared vector cache as the job found it. A row whose
    text the cache knows gets that vector; the others are embedded (each distinct text once per batch)."""

    job: JobSpec  # bound by ``embed_actor``

    def __init__(self):
        from localidx.cluster.shared import SharedDB
        from localidx.embed import get_embedder

        job = self.job
        self.embedder = get_embedder(job.model, threads=job.embed_threads or None)
        db = SharedDB(job.uri, job.model_id, job.dim)
        self.cache = db.open(job.cache_table, job.cache_version)

    def __call__(self, batch: pa.Table) -> pa.Table:
        import numpy as np

        from localidx.cluster.shared import cached_vectors
        from localidx.embed import embedding_input

        rows = batch.to_pylist()
        chunk_rows = [r for r in rows if r["id"]]
        cached = cached_vectors(self.cache, [r["embed_key"] for r in chunk_rows])
        missing: dict[str, str] = {}
        for r in chunk_rows:
            if r["embed_key"] not in cached:
                missing.setdefault(r["embed_key"], r["search_text"])
        fresh: dict[str, list[float]] = {}
        if missing:
            vectors = self.embedder.embed([embedding_input(t) for t in missing.values()])
            fresh = {k: np.asarray(v, dtype=np.float32).tolist() for k, v in zip(missing, vectors)}
        first: set[str] = set()
        for r in chunk_rows:
            key = r["embed_key"]
            if key in fresh:
                r["vector"] = fresh[key]
                r["fresh"] = True
                r["embedded"] = key not in first
                first.add(key)
            else:
                r["vector"] = cached[key]
        _fault_point(self.job, "embed")
        return pa.Table.from_pylist(rows, schema=envelope_schema(self.job.dim))


def embed_actor(job: JobSpec) -> type:
    """``Embed`` with the job bound to the class, not passed to its constructor: Ray keeps constructor arguments in
    the object store, from where a restarted actor could fail to get them back."""
    return type("Embed", (Embed,), {"job": job, "__module__": __name__})


# -- stage 4: write fragments (tasks); the driver commits them ----------------------------------------------------

RESULT_SCHEMA = pa.schema([pa.field("kind", pa.string()), pa.field("payload", pa.binary())])


def write_batch(batch: pa.Table, job: JobSpec) -> pa.Table:
    """Stage 4: the batch's chunk rows as new fragments of the chunk table, its newly embedded vectors as new
    fragments of the cache (uncommitted: the driver commits them once, ``localidx.cluster.shared.replace_rows``),
    and its records. Returns ``(kind, payload)`` rows: ``chunks`` / ``cache`` (a pickled FragmentMetadata),
    ``record`` (JSON), ``stats`` (JSON)."""
    import pyarrow.compute as pc
    from lance_ray import LanceFragmentWriter

    from localidx.cluster.shared import cache_schema, chunk_schema

    schema = chunk_schema(job.dim)
    is_chunk = pc.not_equal(batch.column("id"), "")
    chunks = batch.filter(is_chunk)
    out: list[dict] = []
    if chunks.num_rows:
        written = LanceFragmentWriter(job.chunks_uri, schema=schema)(chunks.select(schema.names).cast(schema))
        out.extend({"kind": "chunks", "payload": f} for f in written.column("fragment").to_pylist())
    new = chunks.filter(chunks.column("embedded"))
    if new.num_rows:
        seen: set[str] = set()
        keep = [i for i, k in enumerate(new.column("embed_key").to_pylist()) if not (k in seen or seen.add(k))]
        entries = pa.table({"key": new.column("embed_key").take(keep), "vector": new.column("vector").take(keep)})
        written = LanceFragmentWriter(job.cache_uri, schema=cache_schema(job.dim))(
            entries.cast(cache_schema(job.dim)))
        out.extend({"kind": "cache", "payload": f} for f in written.column("fragment").to_pylist())
    for record in batch.filter(pc.invert(is_chunk)).column("record").to_pylist():
        out.append({"kind": "record", "payload": record.encode()})
    fresh = sum(1 for f in chunks.column("fresh").to_pylist() if f)
    stats = {"rows": chunks.num_rows, "embedded": new.num_rows, "reused": chunks.num_rows - fresh}
    out.append({"kind": "stats", "payload": json.dumps(stats).encode()})
    _fault_point(job, "write")
    return pa.Table.from_pylist(out, schema=RESULT_SCHEMA)


def unpickle(payload: bytes):
    import pickle

    return pickle.loads(payload)
