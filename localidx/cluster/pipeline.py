"""The cluster job: a manifest of repositories -> one shared database, as a Ray Data pipeline.

Place in the flow: the org-scale writer, beside ``localidx.index.indexer`` (which stays the writer of every local
index).

    repositories -> prepare (a task per repository: checkout, discover, read what changed)
                 -> chunk   (CPU tasks: the library's chunker and row builder)
                 -> embed   (an actor pool holding the model: one per GPU with ``num_gpus=1`` when the cluster has
                             GPUs, else CPU actors; the shared vector cache first)
                 -> write   (tasks: new fragments of the chunk table and the cache, uncommitted)
                 -> commit  (the driver: one commit per table, ``localidx.cluster.shared.replace_rows``)
                 -> indexes (full-text, scalar, IVF_PQ once large; compaction)

Ray retries a task whose worker dies (``max_retries``) and restarts a dead actor; a retried task's fragments replace
its lost attempt's, which no commit ever names, so a killed worker costs time, never rows. A job that dies before
its commits changes nothing; the next run redoes it (vectors already committed to the cache are not embedded again).

Resources: a *worker* is one embedding actor with one ONNX thread. On a local instance ``--workers N`` starts Ray with
N CPUs; an actor asks for ``ACTOR_CPU`` of a CPU and every task for ``TASK_CPU``, so each core runs one actor and
still has room for the chunking and writing tasks that feed it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from localidx.errors import UsageError

log = logging.getLogger(__name__)

ACTOR_CPU = 0.75
TASK_CPU = 0.25
FILES_PER_CHUNK_TASK = 32
ROWS_PER_EMBED_CALL = 256
ROWS_PER_FRAGMENT = 8192
RETRIES = 3


def require_ray():
    """Ray and Lance's Ray integration, or a one-line ``UsageError`` saying how to install them."""
    import importlib.util

    # Only looked for here: importing Lance before Ray starts its processes makes both warn about forking.
    if not all(importlib.util.find_spec(name) for name in ("ray", "lance", "lance_ray")):
        raise UsageError("the cluster extra is not installed: pip install 'localidx[cluster]'")
    import ray

    return ray


@dataclass
class JobStats:
    """The record of one cluster job (``localidx cluster index --json`` prints it)."""

    uri: str = ""  # redacted
    model: str = ""
    repos: int = 0
    repos_changed: int = 0
    repos_failed: list = field(default_factory=list)  # [{"repo", "reason"}]
    repos_pruned: list = field(default_factory=list)
    files_seen: int = 0
    files_processed: int = 0  # chunked this job
    files_unchanged: int = 0
    files_skipped: int = 0
    files_deleted: int = 0
    chunks_written: int = 0
    chunks_deleted: int = 0
    chunks_embedded: int = 0  # texts sent through the model
    chunks_reused: int = 0  # vectors found in the shared cache
    workers: int = 0
    gpus: int = 0
    duration_s: float = 0.0
    pipeline_s: float = 0.0  # prepare -> write, on Ray
    commit_s: float = 0.0
    index_s: float = 0.0
    rate: float = 0.0  # chunks written per second of pipeline
    indexes_built: list = field(default_factory=list)
    errors: list = field(default_factory=list)  # error chunks: [{"repo", "path", "reason"}]

    def to_dict(self) -> dict:
        return asdict(self)


def _connect_ray(ray, address: str | None, workers: int | None) -> bool:
    """Join the cluster at ``address``, or start a local instance; True when this call started Ray."""
    if ray.is_initialized():
        return False
    options = {"include_dashboard": False, "logging_level": logging.WARNING, "log_to_driver": False}
    if address:
        ray.init(address=address, **options)
    else:
        ray.init(num_cpus=workers or os.cpu_count() or 1, **options)
    return True


def run_job(specs, uri: str, *, model: str, ray_address: str | None = None, workers: int | None = None,
            clones: Path | None = None, prune: bool = False, progress=None) -> JobStats:
    """Index the repositories ``specs`` (``manifest.RepoSpec``) into the shared database at ``uri``."""
    ray = require_ray()
    import platformdirs

    from localidx.cluster import shared, stages
    from localidx.embed import get_embedder

    progress = progress or (lambda *a, **k: None)
    started = time.perf_counter()
    embedder = get_embedder(model)  # for its id and size only; the model loads in the actors
    clones = clones or Path(platformdirs.user_cache_dir("localidx")) / "cluster-clones"
    started_ray = _connect_ray(ray, ray_address, workers)
    try:
        db = shared.SharedDB(uri, embedder.model_id, embedder.dim, create=True)
        stats = JobStats(uri=db.label, model=embedder.model_id, repos=len(specs))
        tables = db.ensure_tables()
        names = db.names
        resources = ray.cluster_resources()
        stats.gpus = int(resources.get("GPU", 0))
        cpus = int(resources.get("CPU", 1))
        stats.workers = stats.gpus or max(1, min(workers or cpus, cpus))
        job = stages.JobSpec(
            uri=uri, model=model, model_id=embedder.model_id, dim=embedder.dim, chunks_table=names.chunks,
            files_table=names.files, cache_table=names.cache, files_version=tables[names.files].version,
            cache_version=tables[names.cache].version, clones=str(clones),
            chunks_uri=db.dataset_uri(names.chunks), cache_uri=db.dataset_uri(names.cache),
            embed_threads=1 if not stats.gpus else 0, fault=os.environ.get(stages.FAULT_ENV, ""))
        progress("pipeline", repos=len(specs), workers=stats.workers, gpus=stats.gpus)
        results = _pipeline(ray, job, specs, stats)
        stats.pipeline_s = round(time.perf_counter() - started, 3)
    finally:
        if started_ray:
            ray.shutdown()
    progress("commit")
    at = time.perf_counter()
    _commit(db, job, specs, results, stats, prune)
    stats.commit_s = round(time.perf_counter() - at, 3)
    progress("indexes")
    at = time.perf_counter()
    stats.indexes_built = shared.build_indexes(db)
    stats.index_s = round(time.perf_counter() - at, 3)
    stats.duration_s = round(time.perf_counter() - started, 3)
    stats.rate = round(stats.chunks_written / stats.pipeline_s, 2) if stats.pipeline_s else 0.0
    return stats


def _pipeline(ray, job, specs, stats: JobStats) -> list[dict]:
    """Run prepare -> chunk -> embed -> write on Ray; the written fragments and the records, collected."""
    import warnings

    import ray.data
    from ray.data import ActorPoolStrategy

    from localidx.cluster import stages

    logging.getLogger("ray.data").setLevel(logging.WARNING)
    items = [{"name": s.name, "url": s.url, "ref": s.ref} for s in specs]
    # Retries are bounded: Ray Data's default retries a task whose worker died without end, so a file that kills
    # its parser's process every time would hang the job instead of failing it. Ray 2.60 takes ``max_retries`` only
    # through its deprecated extra arguments (warning silenced; the extra pins Ray).
    retries = {"max_retries": RETRIES}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
        ds = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
        ds = ds.flat_map(stages.prepare_repo, fn_kwargs={"job": job}, num_cpus=TASK_CPU, **retries)
        ds = ds.map_batches(stages.chunk_batch, fn_kwargs={"job": job}, batch_format="pyarrow",
                            batch_size=FILES_PER_CHUNK_TASK, num_cpus=TASK_CPU, **retries)
        embed_resources = {"num_gpus": 1, "num_cpus": 1} if stats.gpus else {"num_cpus": ACTOR_CPU}
        ds = ds.map_batches(stages.embed_actor(job), batch_format="pyarrow", batch_size=ROWS_PER_EMBED_CALL,
                            compute=ActorPoolStrategy(min_size=1, max_size=stats.workers),
                            max_restarts=RETRIES, max_task_retries=RETRIES, **embed_resources)
        ds = ds.map_batches(stages.write_batch, fn_kwargs={"job": job}, batch_format="pyarrow",
                            batch_size=ROWS_PER_FRAGMENT, num_cpus=TASK_CPU, **retries)
    return ds.take_all()


def _commit(db, job, specs, results: list[dict], stats: JobStats, prune: bool) -> None:
    """The driver's commits, in order cache -> chunks -> files -> repos (``localidx.cluster.shared``)."""
    from localidx.cluster import shared, stages
    from localidx.cluster.manifest import redact_url
    from localidx.store.lance import sql_in, sql_str

    names = db.names
    chunk_fragments, cache_fragments, files, plans = [], [], [], {}
    for item in results:
        kind, payload = item["kind"], item["payload"]
        if kind == "chunks":
            chunk_fragments.append(stages.unpickle(payload))
        elif kind == "cache":
            cache_fragments.append(stages.unpickle(payload))
        elif kind == "stats":
            counts = json.loads(payload)
            stats.chunks_written += counts["rows"]
            stats.chunks_embedded += counts["embedded"]
            stats.chunks_reused += counts["reused"]
        else:
            record = json.loads(payload)
            if record["kind"] == "repo":
                plans[record["repo"]] = record
            else:
                files.append(record)
    for spec in specs:  # a repository whose prepare task left no plan would be a bug: never commit half of it
        if spec.name not in plans:
            raise RuntimeError(f"the job lost the plan of {spec.name}; nothing was committed")
    clauses = []
    for name, plan in sorted(plans.items()):
        stats.files_seen += plan["seen"]
        stats.files_unchanged += plan["unchanged"]
        stats.files_skipped += sum(plan["skipped"].values())
        if plan["error"]:
            stats.repos_failed.append({"repo": name, "reason": plan["error"]})
            continue
        touched = plan["changed"] + plan["gone"]
        stats.files_deleted += len(plan["gone"])
        if touched:
            stats.repos_changed += 1
            clauses.append(f"(repo = {sql_str(name)} AND {sql_in('path', touched)})")
    specified = {s.name for s in specs}
    if prune:
        stats.repos_pruned = [r["repo"] for r in db.repos() if r["repo"] not in specified]
        clauses.extend(f"repo = {sql_str(name)}" for name in stats.repos_pruned)
    for record in files:
        if record["skipped"]:
            stats.files_skipped += 1
        else:
            stats.files_processed += 1
        stats.errors.extend({"repo": record["repo"], "path": record["path"], "reason": r} for r in record["errors"])
    predicate = " OR ".join(clauses) or None

    shared.replace_rows(job.cache_uri, None, cache_fragments)
    stats.chunks_deleted = shared.replace_rows(job.chunks_uri, predicate, chunk_fragments)
    files_uri = db.dataset_uri(names.files)
    file_rows = [{k: r[k] for k in shared.FILES_SCHEMA.names} for r in files]
    shared.replace_rows(files_uri, predicate, shared.write_rows(files_uri, file_rows, shared.FILES_SCHEMA))

    now = time.time()
    previous = {r["repo"]: r for r in db.repos()}
    chunks_table = db.open(names.chunks)
    files_table = db.open(names.files)
    repo_rows = []
    for spec in specs:
        plan = plans[spec.name]
        old = previous.get(spec.name, {})
        if plan["error"]:
            row = {**{k: old.get(k) for k in shared.REPOS_SCHEMA.names}, "repo": spec.name,
                   "url": redact_url(spec.url), "identity": spec.identity, "ref": spec.ref,
                   "status": f"failed: {plan['error']}", "checked_at": now}
        else:
            where = f"repo = {sql_str(spec.name)}"
            changed = bool(plan["changed"] or plan["gone"]) or old.get("commit") != plan["commit"]
            row = {"repo": spec.name, "url": redact_url(spec.url), "identity": spec.identity, "ref": spec.ref,
                   "commit": plan["commit"], "indexed_at": now if changed or not old else old.get("indexed_at"),
                   "files": files_table.count_rows(f"{where} AND skipped = ''"),
                   "chunks": chunks_table.count_rows(where), "status": "ok", "checked_at": now}
        repo_rows.append(row)
    repos_uri = db.dataset_uri(names.repos)
    gone_repos = sorted(specified | set(stats.repos_pruned))
    shared.replace_rows(repos_uri, sql_in("repo", gone_repos),
                        shared.write_rows(repos_uri, repo_rows, shared.REPOS_SCHEMA))
