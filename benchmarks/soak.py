"""Soak run: index real public repositories at several historical commits, as a user would, and check the index.

For each repository of the manifest (``benchmarks/soak_repos.toml``) the work tree is cloned once from its local
mirror (``fetch`` puts them under ``/work/.mirror/<owner>+<name>/repo``; ``--mirrors`` names another place), then
each listed commit is checked out in turn, oldest first, with ``git checkout`` (untracked leftovers stay, as they
would for a user), so every step after the first is an *incremental* ``localidx index`` run. Each run is the CLI in
a subprocess (``localidx index --no-embed --json -q``, or with embedding for the repositories marked ``embed``),
with ``LOCALIDX_HOME`` under ``--work``/state/<name>/inc. After every step the state is read back read-only through
localidx's own library and checked:

1. exit 0, no "internal error" on stderr;
2. coverage: no chunk over the token budget or outside its file; every non-blank line of every indexed file lies in at least one chunk's line range, and its text (after
   the same secret redaction the chunker applies) is in one of those chunks' text;
3. no duplicate chunk ids (in the table, across catalog records);
4. no orphans: table ids == the catalog records' ids, each row's path == its record's; table paths == records with
   chunks; relation chunk ids == the table's code chunks; every relation row points at a live file and chunk;
   every vector has the table's dimension (and, with embedding, none is missing); every catalog file exists in the
   work tree with the content hash the catalog holds; the catalog is not left dirty; ``diagnose`` finds no damage;
   the run's record lists no failed file, no repair and no warning, and its file counts add up;
5. the incremental state equals a ``--rebuild`` of the same commit into a separate, fresh LOCALIDX_HOME: the same
   catalog (path, content hash, skip reason), the same chunk ids, the same relation rows (by chunk id and path);
6. readers: ``status --json`` answers, agrees with the state and sees nothing left to index; a BM25 ``search``
   for an indexed symbol answers;
7. figures: wall time of the run (and of the rebuild), peak RSS of the CLI process, files, chunks, sentinel
   ``error`` chunks, files skipped by reason.

Printed: one row per (repository, commit) as it finishes, then a markdown summary per repository. Written: the raw
results as JSON (``--json``) and the summary as markdown (``--md``). Not a test (it needs repositories from outside,
and takes a while): run it, read it, quote it.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/soak.py [--only sphinx,cobra] [--work /work/soak]
        [--json /work/soak/results.json] [--md benchmarks/soak_results.md] [--no-rebuild-check]

The CLI runs from the interpreter's own environment (``<venv>/bin/localidx``), and the state is read with that
environment's localidx: to keep editing the tree during a long soak, run it from a non-editable install of a commit.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
try:  # the localidx of the interpreter running this (a frozen install can soak while the tree is edited)
    import localidx  # noqa: F401
except ImportError:
    sys.path.insert(0, str(HERE.parent))

MANIFEST = HERE / "soak_repos.toml"
RUN_TIMEOUT_S = 45 * 60  # a run this long is hung (the largest repository indexes in minutes here)
MAX_EXAMPLES = 5  # examples kept per violated invariant
LONG_LINE = 400  # a line longer than this may be cut by characters across chunks: its start is looked for


# -- running the CLI --------------------------------------------------------------------------------------------


def localidx_command() -> list[str]:
    script = Path(sys.executable).parent / "localidx"
    return [str(script)] if script.exists() else [sys.executable, "-m", "localidx"]


def run_cli(args: list[str], cwd: Path, home: Path, log_dir: Path, tag: str) -> dict:
    """Run ``localidx ARGS`` in ``cwd`` with its index at ``home``; returns rc, wall time, peak RSS, stdout/stderr."""
    # No daemon: each command does its own work (what is measured), and the rebuild's home is not a daemon's.
    env = {**os.environ, "LOCALIDX_HOME": str(home), "HF_HUB_OFFLINE": "1", "LOCALIDX": "1", "LOCALIDX_DAEMON": "never"}
    env.pop("LOCALIDX_DEBUG", None)
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / f"{tag}.stdout", log_dir / f"{tag}.stderr"
    started = time.perf_counter()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        # Its own session, so a hung run is stopped with its chunking workers.
        proc = subprocess.Popen(localidx_command() + args, cwd=cwd, env=env, stdout=out, stderr=err,
                                start_new_session=True)
        deadline = time.monotonic() + RUN_TIMEOUT_S
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                timed_out = True
                os.killpg(proc.pid, 9)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    stdout = out_path.read_text(encoding="utf-8", errors="replace")
    stderr = err_path.read_text(encoding="utf-8", errors="replace")
    record = None
    try:
        record = json.loads(stdout) if stdout.strip() else None
    except ValueError:
        pass
    tail = stderr.strip().splitlines()[-5:] + ([f"killed after {RUN_TIMEOUT_S} s: hung"] if timed_out else [])
    return {"rc": proc.returncode, "wall_s": round(wall, 2), "rss_mb": round(usage.ru_maxrss / 1024, 1),
            "record": record, "stderr_tail": tail,
            "internal_error": "internal error" in stderr or "Traceback (most recent call last)" in stderr}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def prepare_clone(spec: dict, work: Path, mirrors: Path) -> Path:
    repo = work / "repos" / spec["name"]
    if not (repo / ".git").exists():
        owner, name = spec["source"].removeprefix("github:").split("/", 1)
        mirror = mirrors / f"{owner}+{name}" / "repo"
        if not mirror.exists():
            raise SystemExit(f"{spec['name']}: no mirror at {mirror} (fetch {spec['source']} first)")
        repo.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(mirror), str(repo)], check=True)
        # The mirror's own hooks and LFS filters are not ours to run; a user without git-lfs sees pointer files.
    return repo


def absent_blobs(repo: Path, commit: str) -> list[str]:
    """Paths of ``commit`` whose blobs the mirror lacks (a snapshot may leave out its largest files)."""
    listing = subprocess.run(["git", "ls-tree", "-r", "-z", commit], cwd=repo, check=True, capture_output=True)
    blobs = {}
    for entry in listing.stdout.split(b"\0"):
        if entry:
            meta, path = entry.split(b"\t", 1)
            _mode, kind, sha = meta.split()
            if kind == b"blob":
                blobs.setdefault(sha, []).append(path)
    check = subprocess.run(["git", "cat-file", "--batch-check"], cwd=repo, check=True, capture_output=True,
                           input=b"\n".join(blobs) + b"\n")
    missing = [line.split()[0] for line in check.stdout.splitlines() if line.endswith(b" missing")]
    return sorted(p.decode("utf-8", "surrogateescape") for sha in missing for p in blobs[sha])


def checkout(repo: Path, commit: str) -> list[str]:
    """``git checkout`` of ``commit``, leaving out (by sparse checkout) files whose blobs the mirror lacks; returns
    those paths. Every other file is as a user's checkout leaves it."""
    absent = absent_blobs(repo, commit)
    escape = str.maketrans({c: "\\" + c for c in "\\*?[]!# "})
    patterns = "/*\n" + "".join(f"!/{p.translate(escape)}\n" for p in absent)
    info = Path(git(repo, "rev-parse", "--git-path", "info"))
    info = info if info.is_absolute() else repo / info
    info.mkdir(parents=True, exist_ok=True)
    (info / "sparse-checkout").write_text(patterns, encoding="utf-8", errors="surrogateescape")
    git(repo, "config", "core.sparseCheckout", "true")
    subprocess.run(["git", "-c", "advice.detachedHead=false", "checkout", "-q", "--force", commit], cwd=repo,
                   check=True, capture_output=True)
    return absent


# -- reading the state back (read-only, through localidx's library) ----------------------------------------------


def read_state(root: Path, home: Path, embedded: bool) -> dict:
    """Everything the checks need from the index of ``root`` at ``home``: catalog records, table rows, relations."""
    from localidx.config import load_settings
    from localidx.store.index import diagnose, open_index

    settings = load_settings(root, {"home": str(home)})
    index = open_index(root, True, settings, read_only=True)
    try:
        damage = [d.line() for d in diagnose(index)]
        records = index.catalog.files()
        dirty = index.catalog.dirty
        columns = ["id", "path", "kind", "symbol", "start_line", "end_line", "chunk_index", "token_count", "text"]
        snapshot = index.store.snapshot()
        rows, dims, vectors_missing = [], Counter(), 0
        if snapshot is not None:
            table = snapshot.search().select(columns + ["vector"]).limit(None).to_arrow()
            rows = table.select(columns).to_pylist()
            vectors = table.column("vector")
            for v in vectors.to_pylist() if embedded else vectors.drop_null().to_pylist():
                if v is None:
                    vectors_missing += 1
                else:
                    dims[len(v)] += 1
        relations = read_relations(index.catalog.connection)
        return {"damage": damage, "generation": index.generation, "records": records, "dirty": dirty, "rows": rows, "dims": dims, "dim": index.store.dim,
                "vectors_missing": vectors_missing, "relations": relations}
    finally:
        index.close()


def read_relations(db) -> dict | None:
    """The relation tables, by chunk id and path instead of their private integer ids; None when there are none."""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "rel_chunks" not in tables:
        return None
    files = dict(db.execute("SELECT fid, path FROM rel_files"))
    chunks = {cid: (chunk_id, fid, head, symbol, line)
              for cid, chunk_id, fid, head, symbol, line in db.execute("SELECT * FROM rel_chunks")}
    dangling = Counter()

    def chunk_id(cid):
        if cid not in chunks:
            dangling["chunk"] += 1
            return f"?{cid}"
        return chunks[cid][0]

    def path(fid):
        if fid not in files:
            dangling["file"] += 1
            return f"?{fid}"
        return files[fid]

    out = {
        "chunks": [(c, path(f), chunk_id(h), s, n) for c, f, h, s, n in chunks.values()],
        "defs": [(chunk_id(c), s, n, path(f), k) for c, s, n, f, k in db.execute("SELECT * FROM rel_defs")],
        "refs": [(chunk_id(c), p, n, path(f), b) for c, p, n, f, b in db.execute("SELECT * FROM rel_refs")],
        "imports": [(path(f), k) for f, k in db.execute("SELECT * FROM rel_imports")],
        "modules": [(path(f), k, w) for f, k, w in db.execute("SELECT * FROM rel_modules")],
        "files": sorted(files.values()),
    }
    # A definition or reference must hang on a chunk of the file it names.
    chunk_file = {c: f for c, (_i, f, *_r) in chunks.items()}
    for table in ("rel_defs", "rel_refs"):
        for cid, fid in db.execute(f"SELECT cid, fid FROM {table}"):
            if chunk_file.get(cid) != fid:
                dangling[f"{table}-file"] += 1
    out["dangling"] = dict(dangling)
    return out


# -- the checks ----------------------------------------------------------------------------------------------------


class Findings:
    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self.examples: dict[str, list[str]] = {}

    def add(self, check: str, example: str = "", n: int = 1) -> None:
        self.counts[check] += n
        if example and len(self.examples.setdefault(check, [])) < MAX_EXAMPLES:
            self.examples[check].append(example)

    def to_dict(self) -> dict:
        return {"counts": dict(self.counts), "examples": self.examples}


def check_state(root: Path, state: dict, embedded: bool, found: Findings) -> None:
    import pygit2

    from localidx.chunk.config import config_language
    from localidx.config import load_settings
    from localidx.discover.files import decode_source
    from localidx.records import CODE_KINDS
    from localidx.safety.redact import redact, redact_env

    records, rows = state["records"], state["rows"]
    for line in state["damage"]:
        found.add("damage", line)
    if state["dirty"]:
        found.add("catalog-dirty", "the catalog is still marked dirty after the run")
    # 3. duplicates
    ids = Counter(r["id"] for r in rows)
    for cid, n in ids.items():
        if n > 1:
            found.add("duplicate-id", f"{cid} x{n}")
    record_ids = Counter(c for rec in records.values() for c in rec.chunk_ids)
    for cid, n in record_ids.items():
        if n > 1:
            found.add("duplicate-id-catalog", f"{cid} x{n}")
    # 4. orphans: table vs catalog
    owner = {c: rec.path for rec in records.values() for c in rec.chunk_ids}
    table_ids = set(ids)
    for cid in sorted(table_ids - set(owner)):
        found.add("orphan-row", cid)
    for cid in sorted(set(owner) - table_ids):
        found.add("missing-row", f"{owner[cid]}: {cid}")
    for r in rows:
        if r["id"] in owner and owner[r["id"]] != r["path"]:
            found.add("row-path-mismatch", f"{r['id']}: row {r['path']} vs catalog {owner[r['id']]}")
    with_chunks = {p for p, rec in records.items() if rec.chunk_ids}
    table_paths = {r["path"] for r in rows}
    for p in sorted(table_paths - with_chunks):
        found.add("orphan-path", p)
    for p, rec in records.items():
        if rec.skipped and rec.chunk_ids:
            found.add("skipped-with-chunks", p)
    # vectors
    for dim, n in state["dims"].items():
        if dim != state["dim"]:
            found.add("vector-dim", f"{n} vectors of dimension {dim}, table says {state['dim']}", n)
    if embedded and state["vectors_missing"]:
        found.add("vector-missing", f"{state['vectors_missing']} rows without a vector after an embedding run",
                  state["vectors_missing"])
    # relations
    rel = state["relations"]
    code_ids = {r["id"] for r in rows if r["kind"] in CODE_KINDS}
    if rel is None:
        if code_ids:
            found.add("relations-missing", "no relation tables, but the table has code chunks")
    else:
        rel_ids = Counter(c[0] for c in rel["chunks"])
        for cid in sorted(set(rel_ids) - table_ids):
            found.add("relation-orphan-chunk", cid)
        for cid in sorted(code_ids - set(rel_ids)):
            found.add("relation-missing-chunk", cid)
        for p in sorted(set(rel["files"]) - with_chunks):
            found.add("relation-orphan-file", p)
        for kind, n in rel["dangling"].items():
            found.add(f"relation-dangling-{kind}", f"{n} rows", n)
    # catalog vs work tree
    for p, rec in records.items():
        abs_path = root / p
        try:
            data = abs_path.read_bytes()
        except OSError as exc:
            found.add("catalog-file-missing", f"{p}: {exc.__class__.__name__}")
            continue
        if str(pygit2.hash(data)) != rec.file_hash:
            found.add("catalog-stale-hash", p)
    # the chunker's own promises: no chunk over the token budget, every range inside its file
    max_tokens = load_settings(root).max_tokens
    for r in rows:
        if r["token_count"] > max_tokens:
            found.add("over-budget", f"{r['path']}:{r['start_line']}-{r['end_line']} {r['kind']}: "
                                     f"{r['token_count']} tokens > {max_tokens}")
    # 2. coverage, file by file
    by_path: dict[str, list[dict]] = {}
    for r in rows:
        by_path.setdefault(r["path"], []).append(r)
    for p, rec in sorted(records.items()):
        if rec.skipped:
            continue
        try:
            data = (root / p).read_bytes()
        except OSError:
            continue
        text = decode_source(data).text  # as localidx reads it: a byte-order mark is not a line's text
        red = (redact_env if config_language(p) == "dotenv" else redact)(text)[0]
        lines = [line[:-1] if line.endswith("\r") else line for line in red.split("\n")]
        chunks = [c for c in by_path.get(p, []) if c["kind"] not in ("summary", "error")]
        if not chunks:
            if any(line.strip() for line in lines):
                found.add("file-without-chunks", p)
            continue
        for c in by_path.get(p, []):
            if not 1 <= c["start_line"] <= c["end_line"] <= max(1, len(lines)):
                found.add("chunk-range", f"{p}:{c['start_line']}-{c['end_line']} {c['kind']} in a file of "
                                         f"{len(lines)} lines")
        holders: list[list[dict]] = [[] for _ in range(len(lines) + 2)]
        for c in chunks:
            for n in range(max(1, c["start_line"]), min(len(lines), c["end_line"]) + 1):
                holders[n].append(c)
        for n, line in enumerate(lines, 1):
            stripped = line.strip()
            if not stripped:
                continue
            if not holders[n]:
                found.add("coverage-line", f"{p}:{n}: {stripped[:80]!r}")
                continue
            probe = stripped if len(stripped) <= LONG_LINE else stripped[:100]
            if any(probe in c["text"] for c in holders[n]):
                continue
            # A line over the token budget is cut by characters into one-line parts that join back to it (a short
            # line of Khmer or Burmese text costs more tokens than the budget holds).
            parts = sorted((c for c in holders[n] if c["start_line"] == c["end_line"] == n),
                           key=lambda c: c["chunk_index"])
            if probe not in "".join(c["text"] for c in parts):
                found.add("coverage-text", f"{p}:{n}: {stripped[:80]!r}")


def compare_states(inc: dict, full: dict, found: Findings) -> None:
    """5. The incremental state against a fresh rebuild of the same commit."""
    inc_cat = {p: (r.file_hash, r.skipped, tuple(sorted(r.chunk_ids))) for p, r in inc["records"].items()}
    full_cat = {p: (r.file_hash, r.skipped, tuple(sorted(r.chunk_ids))) for p, r in full["records"].items()}
    for p in sorted(set(inc_cat) | set(full_cat)):
        a, b = inc_cat.get(p), full_cat.get(p)
        if a != b:
            what = ("only in incremental" if b is None else "only in rebuild" if a is None
                    else "hash" if a[0] != b[0] else "skip reason" if a[1] != b[1] else "chunk ids")
            found.add("rebuild-catalog", f"{p}: {what}")
    a_ids, b_ids = {r["id"] for r in inc["rows"]}, {r["id"] for r in full["rows"]}
    for cid in sorted(a_ids - b_ids):
        found.add("rebuild-ids", f"only in incremental: {cid}")
    for cid in sorted(b_ids - a_ids):
        found.add("rebuild-ids", f"only in rebuild: {cid}")
    ra, rb = inc["relations"], full["relations"]
    if (ra is None) != (rb is None):
        found.add("rebuild-relations", "relation tables in one state only")
        return
    if ra is None:
        return
    for table in ("chunks", "defs", "refs", "imports", "modules"):
        ca, cb = Counter(map(tuple, ra[table])), Counter(map(tuple, rb[table]))
        if ca != cb:
            extra, lost = ca - cb, cb - ca
            example = f"{table}: {sum(extra.values())} only in incremental, {sum(lost.values())} only in rebuild"
            sample = next(iter(extra or lost))
            found.add("rebuild-relations", f"{example}; e.g. {sample}")


def check_record(record: dict | None, found: Findings) -> None:
    """The run's own record: no file failed, nothing needed repair, and its counts add up."""
    if not record:
        return
    for f in record.get("failed_files", []):
        found.add("failed-file", f"{f.get('path')}: {f.get('stage')}: {f.get('reason')}"[:300])
    for line in record.get("repairs", []):
        found.add("repair", line)
    for line in record.get("warnings", []):
        found.add("warning", line)
    parts = ("files_processed", "files_unchanged", "files_skipped", "files_failed")
    if "files_seen" in record and record["files_seen"] != sum(record.get(k, 0) for k in parts):
        found.add("run-counts", f"files_seen {record['files_seen']} != " + " + ".join(
            f"{k.removeprefix('files_')} {record.get(k, 0)}" for k in parts))
    if "skipped_by_reason" in record and sum(record["skipped_by_reason"].values()) != record.get("files_skipped"):
        found.add("run-counts", f"skipped_by_reason {record['skipped_by_reason']} vs files_skipped "
                                f"{record.get('files_skipped')}")


def check_readers(root: Path, home: Path, state: dict, log_dir: Path, tag: str, found: Findings) -> None:
    """``status --json`` agrees with the state and sees nothing left to index; a BM25 search for an indexed
    symbol answers."""
    status = run_cli(["status", "--json"], root, home, log_dir, f"{tag}-status")
    report = status["record"] or {}
    if status["rc"] != 0 or status["internal_error"]:
        found.add("crash-status", f"rc={status['rc']}: {' | '.join(status['stderr_tail'])[:300]}")
    else:
        files = sum(1 for r in state["records"].values() if not r.skipped)
        if (report.get("files"), report.get("chunks")) != (files, len(state["rows"])):
            found.add("status-disagrees", f"status: {report.get('files')} files, {report.get('chunks')} chunks; "
                                          f"state: {files} files, {len(state['rows'])} chunks")
        left = report.get("changed_files", []) + report.get("deleted_files", [])
        if left:
            found.add("status-not-current", f"{len(left)} files changed or deleted right after the run, e.g. "
                                            f"{left[0]}", len(left))
    # A symbol with a word in it: express names route handlers "/" and search refuses a query of no words (exit 2).
    symbol = next((r["symbol"] for r in state["rows"] if r["kind"] in ("function", "method") and r["symbol"]
                   and re.search(r"\w", r["symbol"])), "")
    if symbol:
        search = run_cli(["search", "--mode", "bm25", "--json", "-k", "5", symbol], root, home, log_dir,
                         f"{tag}-search")
        if search["rc"] != 0 or search["internal_error"]:
            found.add("crash-search", f"rc={search['rc']}: {' | '.join(search['stderr_tail'])[:300]}")
        elif not (search["record"] or {}).get("matches"):
            found.add("search-empty", f"no match for {symbol!r}")


def skip_reasons(root: Path, records: dict) -> Counter:
    """Files skipped, by reason: by path and stat (discovery) plus by content (the catalog's records)."""
    from localidx.config import load_settings
    from localidx.discover import discover

    reasons = Counter(s.reason for s in discover(root, load_settings(root)).skipped)
    reasons.update(rec.skipped for rec in records.values() if rec.skipped)
    return reasons


# -- one repository ----------------------------------------------------------------------------------------------


def soak_repo(spec: dict, args) -> list[dict]:
    work = Path(args.work)
    repo = prepare_clone(spec, work, Path(args.mirrors))
    state_dir = work / "state" / spec["name"]
    inc_home, full_home = state_dir / "inc", state_dir / "rebuild"
    if not args.keep_state:
        shutil.rmtree(state_dir, ignore_errors=True)
    embedded = bool(spec.get("embed", False))
    results = []
    for step, commit in enumerate(spec["commits"]):
        absent = checkout(repo, commit)
        sha = git(repo, "rev-parse", "HEAD")
        date = git(repo, "log", "-1", "--format=%cs")
        found = Findings()
        log_dir = state_dir / "logs"
        index_args = ["index", "--json", "-q"] + ([] if embedded else ["--no-embed"])
        inc = run_cli(index_args, repo, inc_home, log_dir, f"{step}-{sha[:12]}-inc")
        if inc["rc"] != 0 or inc["internal_error"]:
            found.add("crash", f"rc={inc['rc']}: {' | '.join(inc['stderr_tail'])[:300]}")
        check_record(inc["record"], found)
        result = {"repo": spec["name"], "step": step, "commit": sha[:12], "date": date, "embed": embedded,
                  "absent_from_mirror": absent, "inc": inc}
        checked = time.perf_counter()
        inc_state = None
        if inc["rc"] == 0:
            inc_state = read_state(repo, inc_home, embedded)
            check_state(repo, inc_state, embedded, found)
            reasons = skip_reasons(repo, inc_state["records"])
            told = (inc["record"] or {}).get("skipped_by_reason")
            if told is not None and {k: v for k, v in told.items() if v} != dict(reasons):
                found.add("skip-reasons-disagree", f"run: {told}; discovery + catalog: {dict(reasons)}")
            check_readers(repo, inc_home, inc_state, log_dir, f"{step}-{sha[:12]}", found)
            result.update(
                files=sum(1 for r in inc_state["records"].values() if not r.skipped),
                chunks=len(inc_state["rows"]),
                error_chunks=sum(1 for r in inc_state["rows"] if r["kind"] == "error"),
                skipped=dict(sorted(reasons.items())),
                kinds=dict(Counter(r["kind"] for r in inc_state["rows"]).most_common()),
            )
        if not args.no_rebuild_check and inc_state is not None:
            shutil.rmtree(full_home, ignore_errors=True)
            full = run_cli(["index", "--rebuild", "--no-embed", "--json", "-q"], repo, full_home, log_dir,
                           f"{step}-{sha[:12]}-rebuild")
            result["rebuild"] = full
            if full["rc"] != 0 or full["internal_error"]:
                found.add("crash-rebuild", f"rc={full['rc']}: {' | '.join(full['stderr_tail'])[:300]}")
            else:
                compare_states(inc_state, read_state(repo, full_home, False), found)
        result["check_s"] = round(time.perf_counter() - checked, 1)
        result["findings"] = found.to_dict()
        results.append(result)
        print_row(result, flush=True)
        inc_state = None
    if not args.keep_state:
        shutil.rmtree(full_home, ignore_errors=True)
    return results


# -- output ------------------------------------------------------------------------------------------------------

ROW = "{repo:<14} {step:>2} {commit:<12} {date:<10} {files:>6} {skipped:>5} {chunks:>7} {errs:>4} {changed:>6} " \
      "{inc:>8} {full:>8} {rss:>6}  {verdict}"


def print_header() -> None:
    print(ROW.format(repo="repo", step="#", commit="commit", date="date", files="files", skipped="skip",
                     chunks="chunks", errs="err", changed="chunked", inc="inc s", full="rebuild", rss="MB",
                     verdict="checks"), flush=True)


def print_row(r: dict, flush: bool = False) -> None:
    rec = r["inc"].get("record") or {}
    counts = r["findings"]["counts"]
    verdict = "ok" if not counts else ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    print(ROW.format(repo=r["repo"][:14], step=r["step"], commit=r["commit"], date=r["date"],
                     files=r.get("files", "-"), skipped=sum(r.get("skipped", {}).values()),
                     chunks=r.get("chunks", "-"), errs=r.get("error_chunks", "-"),
                     changed=rec.get("files_processed", "-"), inc=f"{r['inc']['wall_s']:.1f}",
                     full=f"{r['rebuild']['wall_s']:.1f}" if "rebuild" in r else "-",
                     rss=f"{r['inc']['rss_mb']:.0f}", verdict=verdict), flush=flush)
    for check, examples in r["findings"]["examples"].items():
        for e in examples[:3]:
            print(f"    {check}: {e}", flush=flush)


def summary_markdown(results: list[dict], specs: list[dict], elapsed_s: float) -> str:
    by_repo: dict[str, list[dict]] = {}
    for r in results:
        by_repo.setdefault(r["repo"], []).append(r)
    lines = [
        "| repository | languages | commits (oldest → newest) | files | chunks | error chunks | skipped (last step) "
        "| index s (first; later incremental) | rebuild s | peak MB | crashes | violations |",
        "| --- | --- | --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    totals = Counter()
    for spec in specs:
        rs = by_repo.get(spec["name"])
        if not rs:
            continue
        last = rs[-1]
        crashes = sum(sum(v for k, v in r["findings"]["counts"].items() if k.startswith("crash")) for r in rs)
        violations = sum(sum(v for k, v in r["findings"]["counts"].items() if not k.startswith("crash"))
                         for r in rs)
        times = [f"{r['inc']['wall_s']:.0f}" for r in rs]
        rebuild = max((r["rebuild"]["wall_s"] for r in rs if "rebuild" in r), default=0)
        skipped = ", ".join(f"{k} {v}" for k, v in sorted(last.get("skipped", {}).items(), key=lambda kv: -kv[1]))
        name = spec["name"] + (" (embedded)" if spec.get("embed") else "")
        lines.append(
            f"| {name} | {', '.join(spec.get('languages', []))} | {' → '.join(r['commit'][:8] for r in rs)} "
            f"| {last.get('files', '-')} | {max(r.get('chunks', 0) for r in rs)} "
            f"| {sum(r.get('error_chunks', 0) for r in rs)} | {skipped or '-'} | {times[0]}; {', '.join(times[1:])} "
            f"| {rebuild:.0f} | {max(r['inc']['rss_mb'] for r in rs):.0f} | {crashes} | {violations} |"
        )
        totals.update(repos=1, steps=len(rs), crashes=crashes, violations=violations)
    lines.append("")
    lines.append(f"{totals['repos']} repositories, {totals['steps']} indexed commits: {totals['crashes']} crashes, "
                 f"{totals['violations']} invariant violations; {elapsed_s / 60:.0f} min in all.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", default=str(MANIFEST))
    parser.add_argument("--only", default="", help="comma-separated repository names")
    parser.add_argument("--skip", default="", help="comma-separated repository names to leave out")
    parser.add_argument("--work", default="/work/soak", help="clones under repos/, index state under state/")
    parser.add_argument("--mirrors", default="/work/.mirror")
    parser.add_argument("--json", default="", help="write the raw results here (default: <work>/results-<time>.json)")
    parser.add_argument("--md", default="", help="write the summary table here too")
    parser.add_argument("--no-rebuild-check", action="store_true", help="skip check 5 (halves the time)")
    parser.add_argument("--keep-state", action="store_true", help="keep each repository's index state")
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"

    specs = tomllib.loads(Path(args.manifest).read_text(encoding="utf-8"))["repo"]
    only = {n for n in args.only.split(",") if n}
    skip = {n for n in args.skip.split(",") if n}
    specs = [s for s in specs if (not only or s["name"] in only) and s["name"] not in skip]
    started = time.perf_counter()
    json_path = Path(args.json or Path(args.work) / f"results-{time.strftime('%Y%m%d-%H%M%S')}.json")
    results: list[dict] = []
    print(f"localidx soak: {len(specs)} repositories; {platform.platform()}, {os.cpu_count()} cores", flush=True)
    print_header()
    for spec in specs:
        results.extend(soak_repo(spec, args))
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(results, indent=1, default=str) + "\n", encoding="utf-8")
    elapsed = time.perf_counter() - started
    table = summary_markdown(results, specs, elapsed)
    print()
    print(table)
    print(f"\nraw results: {json_path}")
    if args.md:
        Path(args.md).write_text(table + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
