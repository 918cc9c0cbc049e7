"""Benchmark: localidx as a user meets it from the shell, side by side with semble on the same trees, in one run.

The trees are the short-question benchmark's tuning repositories (``--repos``, default all that are present): each
is cloned from ``--source/<name>`` into ``--work`` and indexed at its ``benchmark_root`` (``--spec``: the peer
benchmark's ``repos.json``), the folder semble indexes. The questions are the benchmark's own for that repository
(``--annotations``). Whole processes are timed (wall from outside, CPU of the process and the children it waited
for). Printed, localidx first, semble beside it, and their ratio:

- **cold index**, per repository and the median: ``localidx index <benchmark_root> --no-daemon -q`` into a new
  index (the static table already built) against a process that builds a ``SembleIndex`` of that folder with an
  empty cache;
- **index with nothing changed** (no daemon), p50 of ``--runs``;
- **search from the shell with a warm daemon**: ``localidx search Q -k 10`` while the work tree's daemon runs, p50
  wall and the client's CPU, against ``semble search Q DIR -k 10`` with its index cache warm; and the daemon's share
  of it (each run's wall less its client CPU: the socket, the hello and the daemon's search);
- **search in the command's own process**: ``localidx search Q --no-daemon`` (what a first search does before it
  starts the daemon: LanceDB, the model and the search in one process);
- **chunks through the daemon**: ``localidx chunks FILE`` (the best match's file) with the daemon running, against
  ``--no-daemon`` (the chunker loaded by the command);
- **first search with no daemon**: ``localidx search`` with ``LOCALIDX_DAEMON=auto`` and no daemon running (it
  starts one in the background and answers by itself), against ``semble search`` with an empty cache;
- **warm search inside the daemon**: ``search/query`` over one socket connection for every question of the
  repository (wall per request), against ``SembleIndex.search`` in a warm process; and pasted reports (the bug-report
  eval's) through the daemon where ``--reports`` names them.

semble (PyPI ``semble`` 0.7.0) runs from its own virtual environment (``--semble``: its python; never a localidx
dependency), with a model2vec model made once from localidx's own static table and vendored tokenizer, so that both
embed with the same vectors (its default model comes from a hub that is unreachable here).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/shell.py --semble /path/to/semble-venv/bin/python \\
        [--repos click,gin] [--work /tmp/localidx-shell] [--runs 7] [--source DIR] [--spec repos.json] \\
        [--annotations DIR] [--scale REPO:HOME ...] [--resume] [--localidx PATH]

``--localidx PATH`` times that ``localidx`` script (a regular install's, what users run) instead of this
interpreter's ``-m localidx`` (an editable install adds its import finder to every start).

``--scale REPO:HOME`` adds the warm in-daemon search for an index built elsewhere (benchmarks/daemon.py's 10k and
100k repositories), with benchmarks/query.py's questions. Not a timed test: machines are noisy; run it, read it,
quote it (with the load average it prints).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _corpus import loadavg, percentile  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SHORTQ = Path("/work/data/shortq")
TUNING = ("nvm curl abseil-cpp dapper phoenix cobra gin pandoc commons-lang express ktor lazy.nvim monolog click "
          "model2vec pydantic sinatra axum serde alamofire zod trpc zig-clap").split()
LOCALIDX = [sys.executable, "-m", "localidx"]
SEMBLE_MODEL = "semble-model"


def run(cmd: list[str], cwd: Path | None = None, env: dict | None = None, timeout: float = 1800) -> dict:
    """One whole process: its wall time, the CPU of it and the children it waited for, its output and status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"wall": wall, "cpu": cpu, "rc": proc.returncode, "out": proc.stdout, "err": proc.stderr}


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:7.0f} ms"


def ratio(a: float, b: float) -> str:
    return f"{a / b:5.2f}x" if b else "   - "


def semble_model(semble: str, work: Path) -> Path:
    """A model2vec model of localidx's static table (float32) and vendored tokenizer, made once under ``work``."""
    target = work / SEMBLE_MODEL
    if (target / "config.json").exists():
        return target
    from localidx.embed.static import StaticSpec, ensure_table

    table = ensure_table(StaticSpec.parse("static-minilm"))
    tokenizer = Path(__file__).resolve().parents[1] / "localidx" / "embed" / "minilm" / "tokenizer.json"
    script = ("import sys, numpy as np, tokenizers, model2vec\n"
              "vectors = np.load(sys.argv[1]).astype(np.float32)\n"
              "tok = tokenizers.Tokenizer.from_file(sys.argv[2])\n"
              "model2vec.StaticModel(vectors=vectors, tokenizer=tok, normalize=True).save_pretrained(sys.argv[3])\n")
    done = run([semble, "-c", script, str(table), str(tokenizer), str(target)])
    if done["rc"] != 0:
        raise SystemExit(f"cannot make the semble model: {done['err'].strip().splitlines()[-1:]}")
    return target


def semble_cli(semble: str) -> list[str]:
    """semble's command, installed beside its python."""
    return [str(Path(semble).with_name("semble"))]


def clone(source: Path, work: Path, name: str) -> Path | None:
    """A clone of ``source/name`` under ``work`` (kept between runs); None when git cannot check it out here."""
    target = work / "clones" / name
    if not (target / ".git").exists() or subprocess.run(["git", "-C", str(target), "status", "--porcelain"],
                                                         capture_output=True).returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        if subprocess.run(["git", "clone", "-q", str(source / name), str(target)],
                          capture_output=True).returncode != 0:
            shutil.rmtree(target, ignore_errors=True)
            return None
    return target


def questions(annotations: Path, name: str) -> list[str]:
    return [item["query"] for item in json.loads((annotations / f"{name}.json").read_text(encoding="utf-8"))]


def cold_index(name: str, repo: Path, root: str, work: Path, semble: str, semble_env: dict) -> dict:
    home = work / "homes" / name
    shutil.rmtree(home, ignore_errors=True)
    env = {"LOCALIDX_HOME": str(home)}
    ours = run([*LOCALIDX, "index", root, "--no-daemon", "-q", "--json"], cwd=repo, env=env)
    if ours["rc"] != 0:
        raise SystemExit(f"{name}: localidx index failed: {ours['err'].strip()[-300:]}")
    record = json.loads(ours["out"])
    with tempfile.TemporaryDirectory(dir=work) as cache:
        theirs = run([semble, "-c", "import sys; from semble import SembleIndex; SembleIndex.from_path(sys.argv[1])",
                      str(repo / root)], env={**semble_env, "SEMBLE_CACHE_LOCATION": cache})
    if theirs["rc"] != 0:
        raise SystemExit(f"{name}: semble failed: {theirs['err'].strip()[-300:]}")
    return {"ours": ours, "theirs": theirs, "chunks": record["chunks_written"], "files": record["files_processed"]}


def daemon_search_p50(repo: Path, env: dict, queries: list[str]) -> list[float]:
    """``search/query`` through one connection to the running daemon: seconds per request."""
    from localidx.config import load_settings
    from localidx.discover import find_root
    from localidx.interface.client import connect

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        root, in_git = find_root(repo)
        settings = load_settings(root)
        times = []
        with connect(root, in_git, settings, timeout=60) as client:
            for q in queries[:3]:
                client.request("search/query", {"query": q, "k": 10}, timeout=120)
            for q in queries:
                started = time.perf_counter()
                client.request("search/query", {"query": q, "k": 10}, timeout=120)
                times.append(time.perf_counter() - started)
        return times
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


SEMBLE_WARM = """
import json, sys, time
from semble import SembleIndex
index = SembleIndex.from_path(sys.argv[1])
queries = json.loads(sys.argv[2])
for q in queries[:3]:
    index.search(q, top_k=10)
times = []
for q in queries:
    started = time.perf_counter()
    index.search(q, top_k=10)
    times.append(time.perf_counter() - started)
print(json.dumps(times))
"""


def shell_searches(name: str, repo: Path, root: str, work: Path, semble: str, semble_env: dict, queries: list[str],
                   runs: int) -> dict:
    env = {"LOCALIDX_HOME": str(work / "homes" / name), "LOCALIDX_DAEMON": "auto", "CI": ""}
    out: dict = {}
    nothing = [run([*LOCALIDX, "index", root, "--no-daemon", "-q"], cwd=repo, env=env) for _ in range(runs)]
    out["unchanged"] = [r["wall"] for r in nothing]
    # First search with no daemon: it answers by itself and starts one; stopped again before the next run.
    first = []
    for q in queries[:max(3, runs // 2)]:
        run([*LOCALIDX, "daemon", "stop"], cwd=repo, env=env)
        first.append(run([*LOCALIDX, "search", *q.split(), "-k", "10"], cwd=repo, env=env)["wall"])
        for _ in range(600):
            if run([*LOCALIDX, "daemon", "status"], cwd=repo, env=env)["rc"] == 0:
                break
            time.sleep(0.1)
    out["first"] = first
    warm = [run([*LOCALIDX, "search", *q.split(), "-k", "10"], cwd=repo, env=env) for q in queries[:runs]]
    out["warm_wall"] = [r["wall"] for r in warm]
    out["warm_cpu"] = [r["cpu"] for r in warm]
    out["daemon_share"] = [r["wall"] - r["cpu"] for r in warm]
    nodaemon = [run([*LOCALIDX, "search", *q.split(), "-k", "10", "--no-daemon"], cwd=repo, env=env)
                for q in queries[:max(3, runs // 2)]]
    out["nodaemon_wall"] = [r["wall"] for r in nodaemon]
    out["nodaemon_cpu"] = [r["cpu"] for r in nodaemon]
    best = next((line.split(":", 1)[0] for r in warm for line in r["out"].splitlines() if ":" in line), None)
    if best:
        chunks = [run([*LOCALIDX, "chunks", best], cwd=repo, env=env) for _ in range(runs)]
        alone = [run([*LOCALIDX, "chunks", best, "--no-daemon"], cwd=repo, env=env) for _ in range(max(3, runs // 2))]
        out["chunks_file"] = best
        out["chunks_wall"], out["chunks_cpu"] = [r["wall"] for r in chunks], [r["cpu"] for r in chunks]
        out["chunks_alone_wall"], out["chunks_alone_cpu"] = [r["wall"] for r in alone], [r["cpu"] for r in alone]
    out["in_daemon"] = daemon_search_p50(repo, env, queries)
    run([*LOCALIDX, "daemon", "stop"], cwd=repo, env=env)
    # semble: a cold cache for its first search, then its cached index from the shell, then in one warm process.
    with tempfile.TemporaryDirectory(dir=work) as cache:
        senv = {**semble_env, "SEMBLE_CACHE_LOCATION": cache}
        cli = semble_cli(semble)
        out["semble_first"] = [run([*cli, "search", queries[0], str(repo / root), "-k", "10"], env=senv)["wall"]]
        theirs = [run([*cli, "search", q, str(repo / root), "-k", "10"], env=senv) for q in queries[:runs]]
    out["semble_wall"] = [r["wall"] for r in theirs]
    out["semble_cpu"] = [r["cpu"] for r in theirs]
    done = run([semble, "-c", SEMBLE_WARM, str(repo / root), json.dumps(queries)], env=semble_env)
    out["semble_in_process"] = json.loads(done["out"]) if done["rc"] == 0 else []
    return out


def scale(spec: str, runs: int) -> None:
    from query import QUERIES

    repo, home = (Path(p) for p in spec.split(":", 1))
    env = {"LOCALIDX_HOME": str(home)}
    run([*LOCALIDX, "daemon", "start"], cwd=repo, env=env)
    try:
        times = daemon_search_p50(repo, env, QUERIES)
    finally:
        run([*LOCALIDX, "daemon", "stop"], cwd=repo, env=env)
    print(f"  {repo}: warm search/query in the daemon p50 {ms(percentile(times, 50))}  p90 "
          f"{ms(percentile(times, 90))}  ({len(times)} questions; load {loadavg()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--semble", required=True, help="the python of a virtual environment with semble 0.7.0")
    parser.add_argument("--repos", default=",".join(TUNING))
    parser.add_argument("--work", type=Path, default=Path("/tmp/localidx-shell"))
    parser.add_argument("--source", type=Path, default=SHORTQ / "repos")
    parser.add_argument("--spec", type=Path, default=SHORTQ / "semble" / "repos.json")
    parser.add_argument("--annotations", type=Path, default=SHORTQ / "semble" / "annotations")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--search-repos", default="click,pydantic,gin",
                        help="repositories whose searches are timed (all are indexed)")
    parser.add_argument("--scale", action="append", default=[], help="REPO:HOME of a larger index")
    parser.add_argument("--resume", action="store_true", help="reuse the cold-index figures of an earlier run")
    parser.add_argument("--localidx", default=None, help="the localidx script to time (default: python -m localidx)")
    args = parser.parse_args()
    if args.localidx:
        LOCALIDX[:] = [str(Path(args.localidx).resolve())]
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.environ.pop("LOCALIDX_SOCK", None)
    os.environ["LOCALIDX_REGISTRY"] = str(work / "registry.json")
    specs = {s["name"]: s for s in json.loads(args.spec.read_text(encoding="utf-8"))}
    names = [n for n in args.repos.split(",") if n in specs and (args.source / n).exists()]
    model = semble_model(args.semble, work)
    semble_env = {"SEMBLE_MODEL_NAME": str(model), "HF_HUB_OFFLINE": "1"}
    print(f"localidx {subprocess.run([*LOCALIDX, '--version'], capture_output=True, text=True).stdout.strip()}; "
          f"semble from {args.semble} with {model}; {os.cpu_count()} cores; load at start {loadavg()}")

    print("\n## Cold index (whole process; localidx: index <benchmark_root> into a new index; semble: SembleIndex "
          "of that folder, empty cache)")
    print(f"{'repository':<14} {'files':>6} {'chunks':>7} {'localidx':>10} {'semble':>10} {'ratio':>7}   "
          f"{'cpu localidx':>13} {'cpu semble':>11}")
    cold = {}
    results = work / "results"
    results.mkdir(exist_ok=True)
    for name in names:
        repo = clone(args.source, work, name)
        if repo is None:
            print(f"{name:<14} skipped: git cannot check it out here")
            continue
        root = specs[name].get("benchmark_root") or "."
        done = results / f"cold-{name}.json"
        if args.resume and done.exists():
            c = json.loads(done.read_text())
        else:
            c = cold_index(name, repo, root, work, args.semble, semble_env)
            c = {"files": c["files"], "chunks": c["chunks"], **{side: {k: c[side][k] for k in ("wall", "cpu")}
                                                                for side in ("ours", "theirs")}}
            done.write_text(json.dumps(c))
        cold[name] = c
        print(f"{name:<14} {c['files']:>6} {c['chunks']:>7} {c['ours']['wall']:9.1f}s {c['theirs']['wall']:9.1f}s "
              f"{ratio(c['ours']['wall'], c['theirs']['wall']):>7}   {c['ours']['cpu']:12.1f}s "
              f"{c['theirs']['cpu']:10.1f}s", flush=True)
    ours = statistics.median(c["ours"]["wall"] for c in cold.values())
    theirs = statistics.median(c["theirs"]["wall"] for c in cold.values())
    pairs = statistics.median(c["ours"]["wall"] / c["theirs"]["wall"] for c in cold.values())
    print(f"{'median':<14} {'':>6} {'':>7} {ours:9.1f}s {theirs:9.1f}s {ratio(ours, theirs):>7}   (median of "
          f"the per-repository ratios {pairs:.2f}x; load {loadavg()})")

    print("\n## From the shell (p50 of whole processes)")
    for name in [n for n in args.search_repos.split(",") if n in cold]:
        repo = clone(args.source, work, name)
        assert repo is not None
        root = specs[name].get("benchmark_root") or "."
        s = shell_searches(name, repo, root, work, args.semble, semble_env, questions(args.annotations, name),
                           args.runs)
        p = lambda values: percentile(values, 50) if values else float("nan")  # noqa: E731
        print(f"{name} ({cold[name]['chunks']} chunks; load {loadavg()})")
        print(f"  index, nothing changed          {ms(p(s['unchanged']))}")
        print(f"  first search, no daemon         {ms(p(s['first']))}   semble, empty cache {ms(p(s['semble_first']))}"
              f"   {ratio(p(s['first']), p(s['semble_first']))}")
        print(f"  search, warm daemon: wall       {ms(p(s['warm_wall']))}   semble, cached index {ms(p(s['semble_wall']))}"
              f"   {ratio(p(s['warm_wall']), p(s['semble_wall']))}")
        print(f"  search, warm daemon: client CPU {ms(p(s['warm_cpu']))}   semble CPU {ms(p(s['semble_cpu']))}"
              f"   {ratio(p(s['warm_cpu']), p(s['semble_cpu']))}")
        print(f"  search, warm daemon: its share  {ms(p(s['daemon_share']))}   (wall less client CPU, p50)")
        print(f"  search --no-daemon: wall        {ms(p(s['nodaemon_wall']))}   CPU {ms(p(s['nodaemon_cpu']))}")
        if s.get("chunks_file"):
            print(f"  chunks {s['chunks_file']}: through the daemon {ms(p(s['chunks_wall']))} wall, "
                  f"{ms(p(s['chunks_cpu']))} CPU; --no-daemon {ms(p(s['chunks_alone_wall']))} wall, "
                  f"{ms(p(s['chunks_alone_cpu']))} CPU")
        print(f"  warm search in the daemon       {ms(p(s['in_daemon']))}   semble in one process "
              f"{ms(p(s['semble_in_process']))}   {ratio(p(s['in_daemon']), p(s['semble_in_process']))}   "
              f"(p50 of {len(s['in_daemon'])} questions)")
    if args.scale:
        print("\n## Larger indexes")
        for spec in args.scale:
            scale(spec, args.runs)
    print(f"\nload at end {loadavg()}")


if __name__ == "__main__":
    main()
