"""Benchmark: indexing a real repository of 50k+ lines with the real model, end to end, as `localidx index` runs.

The repository is built in /tmp as a git repository (one commit) from copies of whole standard-library packages
(asyncio, email, json, http, logging, xml, concurrent, importlib, ... until ``--min-lines``). Each indexing run is a
subprocess running the CLI's own ``main(["index", REPO, "--json"])`` (``--child`` mode of this script) with
``LOCALIDX_HOME`` under /tmp and the default model; the child only adds timestamps: interpreter start, the
indexer's progress events, the indexing pass' start and end (``update``), the model load, and its rusage at exit.
The parent samples the child's process tree (forkserver chunk workers included) for CPU seconds and peak RSS.

Printed: (a) time from the start of the cold run until a BM25 search answers (polled every 0.25 s in-process
through the library, as ``localidx search --mode bm25`` does; then one real CLI search is timed); (b) the cold run
split into process start, discovery, chunk + write (+ full-text index), model load, embedding, and the rest;
(c) the run after editing one function in the middle of one file; (d) a run with nothing changed; (e) disk of the
LanceDB dir and peak RSS.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/index.py [--min-lines 50000] [--work /tmp/localidx-bench/index]

Not a timed test: machines are noisy; run it, read it, quote it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _corpus import WORK, TreeMonitor, du_mb, loadavg, stdlib_repo  # noqa: E402

QUERY = "call_soon_threadsafe event loop"
EDITED = "asyncio/base_events.py"


# -- the child: the CLI with timestamps -----------------------------------------------------------------------


def child(repo: str, events_path: str) -> None:
    t_child = time.time()
    out = open(events_path, "a", buffering=1)

    def emit(event: str, **data) -> None:
        out.write(json.dumps({"event": event, "t": time.time(), **data}) + "\n")

    emit("child_start", t=t_child)
    import atexit

    def at_exit() -> None:
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        emit("exit", cpu_s=me.ru_utime + me.ru_stime, rss_mb=me.ru_maxrss / 1e3,
             children_cpu_s=kids.ru_utime + kids.ru_stime, children_rss_mb=kids.ru_maxrss / 1e3)

    atexit.register(at_exit)

    import localidx.embed.onnx as onnx
    import localidx.index.indexer as indexer
    import localidx.interface.cli as cli

    emit("cli_imported")
    seen: set[str] = set()
    original_call = cli._Progress.__call__

    def progress(self, event: str, **data) -> None:
        if event not in seen or event in ("written", "scan"):
            emit(f"first_{event}" if event in ("chunk", "embed") else event,
                 **{k: v for k, v in data.items() if k != "path"})
            seen.add(event)
        if event == "embed" and data["done"] == data["total"]:
            emit("last_embed", **data)
        original_call(self, event, **data)

    cli._Progress.__call__ = progress
    name = "update" if hasattr(indexer, "update") else "_run"  # the pass run_index calls, under the lock
    original_run = getattr(indexer, name)

    def timed_run(*args, **kwargs):
        emit("run_start")
        try:
            return original_run(*args, **kwargs)
        finally:
            emit("run_end")

    setattr(indexer, name, timed_run)
    original_load = onnx.FastEmbedder._load

    def timed_load(self):
        if self._model is not None:
            return self._model
        emit("load_start")
        model = original_load(self)
        emit("load_end")
        return model

    onnx.FastEmbedder._load = timed_load
    try:
        cli.main(["index", repo, "--json"])
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise


# -- the parent -----------------------------------------------------------------------------------------------


def _run_child(repo: Path, home: Path, tag: str, poll=None, model: str | None = None) -> dict:
    """One indexing run in a subprocess; returns the stats, events (relative to spawn) and resource figures."""
    events_path = home.parent / f"events-{tag}.jsonl"
    events_path.unlink(missing_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LOCALIDX_HOME": str(home)}
    env.pop("LOCALIDX_EMBED_MODEL", None)
    if model:
        env["LOCALIDX_EMBED_MODEL"] = model
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t_spawn = time.time()
    proc = subprocess.Popen([sys.executable, __file__, "--child", str(repo), str(events_path)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    polled = None
    with TreeMonitor(proc.pid) as monitor:
        if poll is not None:
            polled = poll(proc, t_spawn)
        stdout, stderr = proc.communicate()
    wall = time.time() - t_spawn
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"indexing failed ({proc.returncode}):\n{stderr}")
    stats = json.loads(stdout)
    events: dict[str, dict] = {}
    for line in events_path.read_text().splitlines():
        record = json.loads(line)
        record["t"] -= t_spawn
        events.setdefault(record["event"], record)
    worker_cpu = sum(c for pid, c in monitor.cpu.items() if pid != proc.pid)
    root_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"stats": stats, "events": events, "wall_s": wall, "root_cpu_s": root_cpu, "worker_cpu_s": worker_cpu,
            "peak_rss_root_mb": events["exit"]["rss_mb"], "peak_rss_single_mb": monitor.peak_single_mb,
            "peak_rss_tree_mb": monitor.peak_tree_mb, "polled": polled}


def _poller(repo: Path, home: Path, model: str | None):
    from localidx.config import load_settings
    from localidx.store.index import open_index
    from localidx.retrieve import search

    settings = load_settings(repo, {"home": str(home), "embed_model": model})

    def poll(proc, t_spawn: float) -> dict:
        tries, last = 0, ""
        while proc.poll() is None:
            tries += 1
            try:
                index = open_index(repo, True, settings, read_only=True)
                try:
                    matches = search(index, QUERY, k=5, mode="bm25")
                finally:
                    index.close()
                if matches:
                    found = time.time() - t_spawn
                    t0 = time.perf_counter()
                    cli = subprocess.run([sys.executable, "-m", "localidx", "search", QUERY, "--mode", "bm25",
                                          "--json"], cwd=repo, capture_output=True, text=True,
                                         env={**os.environ, "LOCALIDX_HOME": str(home), "HF_HUB_OFFLINE": "1",
                                              **({"LOCALIDX_EMBED_MODEL": model} if model else {})})
                    cli_s = time.perf_counter() - t0
                    cli_matches = len(json.loads(cli.stdout)["matches"]) if cli.returncode == 0 else -1
                    return {"first_match_s": found, "tries": tries, "top": f"{matches[0].path}:{matches[0].start_line}",
                            "cli_search_s": cli_s, "cli_matches": cli_matches}
            except Exception as exc:  # noqa: BLE001 - not indexed yet, or no full-text index yet: poll again
                last = f"{type(exc).__name__}: {str(exc)[:120]}"
            time.sleep(0.25)
        return {"first_match_s": None, "tries": tries, "last_error": last}

    return poll


def _edit(repo: Path) -> str:
    """Add one statement inside a method in the middle of a large file (line numbers below it shift)."""
    path = repo / EDITED
    lines = path.read_text().splitlines(keepends=True)
    middle = len(lines) // 2
    for i in range(middle, len(lines)):
        if lines[i].lstrip().startswith("def ") and lines[i].startswith("    "):
            j = i
            while not lines[j].rstrip().endswith(":"):  # the end of the signature
                j += 1
            j += 1
            first = lines[j].strip()
            if first[:3] in ('"""', "'''"):  # insert after the docstring: the chunk's doc stays the same
                quote = first[:3]
                if not (len(first) > 3 and first.endswith(quote)):
                    j += 1
                    while quote not in lines[j]:
                        j += 1
                j += 1
            body = lines[j]
            indent = body[: len(body) - len(body.lstrip())] or " " * 8
            lines.insert(j, f"{indent}_bench_marker = {time.time_ns()}  # benchmark edit\n")
            path.write_text("".join(lines))
            return f"{EDITED}:{j + 1} (in {lines[i].strip()[:60]})"
    raise SystemExit("no method found to edit")


def _phase_lines(r: dict) -> list[str]:
    e, s = r["events"], r["stats"]
    run_start, run_end = e["run_start"]["t"], e["run_end"]["t"]
    lines = [f"  wall {r['wall_s']:.2f} s   cpu {r['root_cpu_s'] + r['worker_cpu_s']:.1f} s "
             f"(indexer {r['root_cpu_s']:.1f} s + chunk workers {r['worker_cpu_s']:.1f} s)   "
             f"RunStats.duration_s {s['duration_s']:.2f}   write_s {s['write_s']:.2f}   embed_s {s['embed_s']:.2f}"]
    lines.append(f"  process start   {run_start:6.2f} s  (interpreter {e['child_start']['t']:.2f} s, CLI imports "
                 f"{e['cli_imported']['t'] - e['child_start']['t']:.2f} s, lock + open index + lancedb import "
                 f"{run_start - e['cli_imported']['t']:.2f} s)")
    scan = e["scan"]["t"]
    lines.append(f"  discovery       {scan - run_start:6.2f} s  (to the scan event: {e['scan']['files']} files, "
                 f"{e['scan']['changed']} to chunk)")
    written = e["written"]["t"]
    lines.append(f"  chunk + write   {written - scan:6.2f} s  ({s['chunks_written']} chunks written, full-text index "
                 f"updated; BM25 answers from here)")
    load = e["load_end"]["t"] - e["load_start"]["t"] if "load_end" in e else 0.0
    if "load_end" in e:
        lines.append(f"  model load      {load:6.2f} s  (inside embed_s)")
    if s["embed_s"]:
        lines.append(f"  embedding       {s['embed_s'] - load:6.2f} s  ({s['chunks_embedded']} embedded, "
                     f"{s['chunks_reused']} reused; {s['chunks_embedded'] / max(s['embed_s'] - load, 1e-9):.1f} "
                     f"chunks/s without the load; RunStats.rate {s['rate']})")
    after = written + s["embed_s"]
    lines.append(f"  rest of run     {run_end - after:6.2f} s  (pending count, catalog; ensure_indexes after "
                 f"embedding is inside embed_s)")
    lines.append(f"  exit            {r['wall_s'] - run_end:6.2f} s  (JSON output, interpreter exit)")
    lines.append(f"  work            {s['duration_s'] - load:6.2f} s  (duration_s without the model load)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-lines", type=int, default=50_000)
    parser.add_argument("--work", type=Path, default=WORK / "index")
    parser.add_argument("--model", default=None, help="embedding model (default: the default model; fake for a "
                        "smoke test of this script)")
    parser.add_argument("--child", nargs=2, metavar=("REPO", "EVENTS"), help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="also print every figure as one JSON object")
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return

    import shutil

    work = args.work.resolve()
    repo, home = work / "repo", work / "home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    packages, lines = stdlib_repo(repo, args.min_lines)
    files = sum(1 for _ in repo.rglob("*.py"))
    print(f"repository        {repo}: {lines:,} lines of Python in {files} files ({', '.join(packages)}), one commit")
    print(f"index home        {home}   load average at start {loadavg()}")
    poll = _poller(repo, home, args.model)  # imports lancedb and the search path now, not while the child runs

    cold = _run_child(repo, home, "cold", poll=poll, model=args.model)
    p = cold["polled"]
    if p["first_match_s"] is None:
        print(f"\n(a) no BM25 answer before the cold run ended ({p['tries']} polls, last error {p['last_error']})")
    else:
        print(f"\n(a) first BM25 answer during the cold run: {p['first_match_s']:.2f} s after `localidx index` was "
              f"started "
              f"({p['tries']} polls; top {p['top']});\n    a `localidx search --mode bm25 --json` CLI call then took "
              f"{p['cli_search_s']:.2f} s ({p['cli_matches']} matches) while the indexer was embedding")
    print("\n(b) cold index, full, with embedding")
    print("\n".join(_phase_lines(cold)))

    where = _edit(repo)
    incremental = _run_child(repo, home, "edit", model=args.model)
    s = incremental["stats"]
    print(f"\n(c) after editing one file ({where}): {s['files_processed']} file chunked, {s['chunks_written']} chunks "
          f"written, {s['chunks_deleted']} deleted, {s['chunks_embedded']} embedded, {s['chunks_reused']} reused")
    print("\n".join(_phase_lines(incremental)))

    unchanged = _run_child(repo, home, "unchanged", model=args.model)
    s = unchanged["stats"]
    print(f"\n(d) nothing changed: {s['files_unchanged']} unchanged, {s['files_processed']} chunked, "
          f"{s['chunks_embedded']} embedded")
    print("\n".join(_phase_lines(unchanged)))

    print(f"\n(e) disk: LanceDB dir {du_mb(home / 'lancedb'):.1f} MB (whole home {du_mb(home):.1f} MB) for "
          f"{cold['stats']['chunks_written']} chunks")
    for label, r in (("cold", cold), ("edit", incremental), ("unchanged", unchanged)):
        print(f"    peak RSS {label:<9}  indexer {r['peak_rss_root_mb']:.0f} MB, largest process "
              f"{r['peak_rss_single_mb']:.0f} MB, whole tree at once {r['peak_rss_tree_mb']:.0f} MB")
    print(f"load average at end {loadavg()}")
    if args.json:
        print(json.dumps({"lines": lines, "packages": packages, "cold": cold, "edit": incremental,
                          "unchanged": unchanged}, default=str))


if __name__ == "__main__":
    main()
