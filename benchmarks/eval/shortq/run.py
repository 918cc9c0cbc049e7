"""Short questions: localidx ``search -k 10`` beside the peer (semble) and BM25, scored by the peer benchmark's own
NDCG@10 code, by category, language and repository, paired per question; on the peer's questions (``--set shortq``)
or on the generated set (``--set dev``, ``devset.py``).

Place in the flow: a benchmark over retrieve; it prints figures and asserts nothing. README.md beside this file says
what each set is, how to install the peer, and what the figures mean.

For each selected repository: the folder the set indexes (the peer's ``benchmark_root``) is copied out of a local
checkout at the pinned revision into ``--work``/trees/<set>/<name> (a fresh git repository holding only that
folder), indexed there by localidx (the index in ``--work``/index/<set>/<name>, kept between runs and rebuilt when
localidx's indexing code changes), and every question is asked as ``localidx search -k 10 QUESTION`` asks it
(``search_response``, in-process, hybrid unless ``--mode``). The peer indexes the same folder in a subprocess
(``semble_worker.py``, run by ``--semble-python``). Ranked lists are cached per retriever, code fingerprint and
repository under ``--work``/runs: a stopped run resumes where it stopped, and a rerun after a ranking change asks
localidx again but not the peer. Paths are reported relative to the repository root (``benchmark_root`` + path).

    .venv/bin/python benchmarks/eval/shortq/run.py --semble-bench /work/data/shortq/semble \\
        --checkouts /work/data/shortq/repos --work /work/scratch/W [--repo click --repo gin] [--mode bm25] \\
        [--files] [--semble-python /path/to/semble-venv/bin/python] [--set dev --split tuning]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE))

import scoring  # noqa: E402

MODES = ("hybrid", "bm25", "vector")
SEMBLE_VERSION = "0.7.0"
# retriever -> the worker's setting: its default; BM25 with its ranking rules, no vectors; its BM25 alone
SEMBLE_ALPHAS = {"semble": "auto", "semble-bm25": "0.0", "semble-bm25-plain": "0.0:plain"}


@dataclass
class RepoJob:
    """One repository of a set: where its checkout is, which folder is indexed, and its questions (``query``,
    ``relevant`` / ``secondary`` targets as the peer's annotations write them, ``category``)."""

    set: str
    name: str
    language: str
    checkout: Path
    revision: str
    root: str | None  # the folder indexed, relative to the repository; None: all of it
    tasks: list[dict] = field(default_factory=list)
    split: str = ""  # the generated set's half: "tuning" or "heldout"
    full_name: str = ""  # owner/name, for the generated set

    @property
    def questions_key(self) -> str:
        """A digest of the questions, so cached answers belong to the questions they answer."""
        return hashlib.sha256(json.dumps(self.tasks, sort_keys=True).encode()).hexdigest()[:10]

    @property
    def prefix(self) -> str:
        return f"{self.root.strip('/')}/" if self.root else ""


# -- the sets -----------------------------------------------------------------------------------------------------

def shortq_jobs(up: scoring.Upstream, args) -> list[RepoJob]:
    """The peer benchmark's repositories that have both an annotation file and a checkout."""
    data = up.data
    specs = data.load_repo_specs(Path(args.repos_json))
    data.ANNOTATIONS_DIR = Path(args.annotations)  # load_tasks reads the module's folder; the peer's code as is
    annotated = {p.stem for p in Path(args.annotations).glob("*.json")}
    wanted = set(args.repo)
    unknown = wanted - set(specs)
    if unknown:
        raise SystemExit(f"not in {args.repos_json}: {', '.join(sorted(unknown))}")
    usable = {n: s for n, s in specs.items() if n in annotated and (Path(args.checkouts) / n).is_dir()
              and (not wanted or n in wanted)}
    missing = wanted - set(usable)
    if missing:
        raise SystemExit(f"no annotation file or no checkout under {args.checkouts} for: {', '.join(sorted(missing))}")
    tasks = data.apply_task_filters(data.load_tasks(repo_specs=usable), languages=args.language or None)
    jobs: dict[str, RepoJob] = {}
    for task in tasks:
        spec = usable[task.repo]
        job = jobs.setdefault(task.repo, RepoJob("shortq", task.repo, spec.language, Path(args.checkouts) / task.repo,
                                                 spec.revision, spec.benchmark_root))
        job.tasks.append({"query": task.query, "category": task.category,
                          "targets": [{"path": t.path, "start_line": t.start_line, "end_line": t.end_line}
                                      for t in task.all_relevant]})
    if not jobs:
        raise SystemExit("no questions matched the selection")
    return [jobs[n] for n in sorted(jobs)]


def dev_jobs(args) -> list[RepoJob]:
    """The generated set's repositories (``devset.REPOS``) in the half asked for; questions are made later, from
    each repository's tree."""
    import ctags
    import devset

    ctags.require_ctags()
    halves = devset.split_of()
    jobs = []
    for full, revision, language in devset.REPOS:
        name = full.split("/")[1]
        if args.split != "all" and halves[full] != args.split:
            continue
        if args.repo and name not in args.repo and full not in args.repo:
            continue
        if args.language and language not in args.language:
            continue
        checkout = args.mirrors / full.replace("/", "+") / "repo"
        if not checkout.exists():
            raise SystemExit(f"{full}: no git directory at {checkout} (fetch github:{full} first)")
        jobs.append(RepoJob("dev", name, language, checkout, revision, None, split=halves[full], full_name=full))
    if not jobs:
        raise SystemExit("no repository of the generated set matched the selection")
    return jobs


def dev_questions(job: RepoJob, tree: Path, work: Path) -> list[dict]:
    """The generated questions of ``job``'s tree, cached by the generator's code and ctags' version."""
    import ctags
    import devset

    code = b"".join((HERE / f).read_bytes() for f in ("devset.py", "ctags.py")) + ctags.require_ctags().encode()
    path = work / "dev-questions" / hashlib.sha256(code).hexdigest()[:10] / f"{job.name}.json"
    if path.is_file():
        return json.loads(path.read_text())
    made = devset.questions(tree, job.full_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(made, indent=0))
    return made


# -- trees and fingerprints ---------------------------------------------------------------------------------------

def _git(*args: str, cwd: Path | None = None, env: dict | None = None) -> str:
    return subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@localidx.invalid",
                           "-c", "init.defaultBranch=main", "-c", "core.autocrlf=false", *args], cwd=cwd,
                          check=True, capture_output=True, text=True, env=env).stdout


def prepare_tree(job: RepoJob, dest: Path) -> Path:
    """``dest``: a git repository holding the job's folder at its revision, read from the checkout's objects
    (nothing in the checkout is written). Kept when it is already there."""
    marker = dest / ".git" / "bench-tree"
    stamp = f"{job.revision} {job.root or ''}"
    if marker.is_file() and marker.read_text() == stamp:
        return dest
    git_dir = _git("-C", str(job.checkout), "rev-parse", "--absolute-git-dir").strip()
    try:
        _git("--git-dir", git_dir, "rev-parse", "--verify", "-q", f"{job.revision}^{{commit}}")
    except subprocess.CalledProcessError:
        raise SystemExit(f"{job.checkout}: revision {job.revision} is not there") from None
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    index_file = dest.parent / f".{dest.name}.index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index_file)}
    treeish = f"{job.revision}:{job.root}" if job.root else job.revision
    _git("--git-dir", git_dir, "read-tree", treeish, env=env)
    _git("--git-dir", git_dir, f"--work-tree={dest}", "checkout-index", "-a", "-f", env=env)
    index_file.unlink()
    _git("init", "-q", cwd=dest)
    _git("add", "-A", "-f", cwd=dest)
    _git("commit", "-q", "--no-verify", "-m", stamp, cwd=dest)
    marker.write_text(stamp)
    return dest


def fingerprint(exclude: tuple[str, ...] = ()) -> str:
    """A digest of localidx's source (``exclude``: top-level parts of the package left out), so cached indexes and
    answers follow the code they came from."""
    package = ROOT / "localidx"
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(package)
        if not path.is_file() or "__pycache__" in rel.parts or rel.parts[0] in exclude:
            continue
        digest.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


# -- retrievers ---------------------------------------------------------------------------------------------------

class LocalidxRunner:
    """Indexes each tree once per indexing-code fingerprint and answers questions as ``localidx search`` does."""

    def __init__(self, work: Path, model: str | None, reindex: bool):
        self.work, self.model, self.reindex = work, model, reindex
        self.index_fp = fingerprint(exclude=("retrieve",)) + (f"-{model}" if model else "")
        self.answer_fp = fingerprint() + (f"-{model}" if model else "")
        self._open: tuple[str, object] | None = None

    def _index(self, job: RepoJob, tree: Path):
        from localidx.config import load_settings
        from localidx.index.indexer import run_index
        from localidx.store.index import open_index

        home = self.work / "index" / job.set / job.name
        overrides = {"home": str(home)}
        if self.model:
            overrides["embed_model"] = self.model
        settings = load_settings(tree, overrides)
        marker = home / "bench-fingerprint"
        fresh = marker.is_file() and marker.read_text() == self.index_fp and not self.reindex
        if not fresh:
            started = time.perf_counter()
            stats = run_index(tree, True, settings, rebuild=marker.exists() or self.reindex)
            log(f"  {job.set}/{job.name}: localidx indexed {stats.chunks_embedded} new vectors in "
                f"{time.perf_counter() - started:.0f}s")
            marker.write_text(self.index_fp)
        return open_index(tree, True, settings, read_only=True)

    def answer(self, job: RepoJob, tree: Path, mode: str, files: bool) -> list[dict]:
        from localidx.errors import LocalidxError
        from localidx.retrieve.search import search_response

        key = f"{job.set}/{job.name}"
        if self._open is None or self._open[0] != key:
            self.close()
            self._open = (key, self._index(job, tree))
        index = self._open[1]
        out = []
        for task in job.tasks:
            started = time.perf_counter()
            try:
                response = search_response(index, task["query"], k=scoring.K, mode=mode, files=files)
            except LocalidxError as exc:  # a question localidx refuses is a question answered with nothing
                response = {"matches": [], "files": [], "error": str(exc)}
            ms = (time.perf_counter() - started) * 1000
            items = response["files"] if files else response["matches"]
            out.append({"ranked": [[job.prefix + m["path"], m["start_line"], m["end_line"]] for m in items],
                        "ms": round(ms, 3)})
        return out

    def close(self) -> None:
        if self._open is not None:
            self._open[1].close()
            self._open = None


class SembleRunner:
    """The peer, in a subprocess of its own environment, with a model2vec model made from localidx's table."""

    def __init__(self, work: Path, python: str):
        self.work, self.python = work, python
        self.model_dir = self.work / "semble-model"
        self.fp = f"{SEMBLE_VERSION}-{self._ensure_model()}"

    def _ensure_model(self) -> str:
        from localidx.embed.static import StaticSpec, ensure_table

        table = ensure_table(StaticSpec())
        tokenizer = ROOT / "localidx" / "embed" / "minilm" / "tokenizer.json"
        digest = hashlib.sha256(table.read_bytes() + tokenizer.read_bytes()).hexdigest()[:12]
        marker = self.model_dir / "bench-fingerprint"
        if not (marker.is_file() and marker.read_text() == digest):
            shutil.rmtree(self.model_dir, ignore_errors=True)
            subprocess.run([self.python, str(HERE / "semble_worker.py"), "model", "--table", str(table),
                            "--tokenizer", str(tokenizer), "--out", str(self.model_dir)], check=True,
                           env=self._env())
            marker.write_text(digest)
            log(f"  semble model made from {table} into {self.model_dir}")
        return digest

    def _env(self) -> dict:
        return {**os.environ, "HF_HUB_OFFLINE": "1", "SEMBLE_MODEL_NAME": str(self.model_dir),
                "SEMBLE_CACHE_LOCATION": str(self.work / "semble-cache")}

    def answer(self, job: RepoJob, tree: Path, retrievers: list[str]) -> dict[str, list[dict]]:
        alphas = [SEMBLE_ALPHAS[r] for r in retrievers]
        stdin = "".join(json.dumps({"query": t["query"]}) + "\n" for t in job.tasks)
        done = subprocess.run([self.python, str(HERE / "semble_worker.py"), "search", "--tree", str(tree),
                               "--alphas", ",".join(alphas)], input=stdin, capture_output=True, text=True,
                              env=self._env())
        if done.returncode != 0:
            raise SystemExit(f"semble failed on {job.name}:\n{done.stderr[-3000:]}")
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        out = {r: [None] * len(job.tasks) for r in retrievers}
        by_alpha = dict(zip(alphas, retrievers))
        for line in lines[1:]:
            out[by_alpha[line["alpha"]]][line["i"]] = {
                "ranked": [[job.prefix + p, s, e] for p, s, e in line["ranked"]], "ms": line["ms"]}
        return out


# -- the run ------------------------------------------------------------------------------------------------------

def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _cache_path(work: Path, retriever: str, fp: str, job: RepoJob) -> Path:
    return work / "runs" / retriever / fp / job.set / f"{job.name}-{job.questions_key}.jsonl"


def _load(path: Path, n: int) -> list[dict] | None:
    if not path.is_file():
        return None
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows if len(rows) == n else None


def _store(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.replace(path)


def run_set(jobs: list[RepoJob], args, up: scoring.Upstream) -> list[dict]:
    """Every retriever's per-question rows over ``jobs`` (ranked lists from the cache or asked now)."""
    localidx = LocalidxRunner(args.work, args.model, args.reindex)
    semble = SembleRunner(args.work, args.semble_python) if args.semble_python else None
    retrievers = [f"localidx{'' if m == 'hybrid' else '-' + m}" for m in args.mode]
    retrievers += [r + "-files" for r in retrievers] if args.files else []
    semble_names = list(SEMBLE_ALPHAS) if semble else []
    rows: list[dict] = []
    try:
        for job in jobs:
            started = time.perf_counter()
            tree = prepare_tree(job, args.work / "trees" / job.set / job.name)
            if job.set == "dev":
                job.tasks = dev_questions(job, tree, args.work)
                if not job.tasks:
                    log(f"{job.set}/{job.name}: no questions")
                    continue
            answers: dict[str, list[dict]] = {}
            for name in retrievers:
                mode = name.removeprefix("localidx").removesuffix("-files").lstrip("-") or "hybrid"
                path = _cache_path(args.work, name, localidx.answer_fp, job)
                cached = None if args.reindex else _load(path, len(job.tasks))
                if cached is None:
                    cached = localidx.answer(job, tree, mode, name.endswith("-files"))
                    _store(path, cached)
                answers[name] = cached
            if semble_names:
                paths = {r: _cache_path(args.work, r, semble.fp, job) for r in semble_names}
                cached = {r: _load(p, len(job.tasks)) for r, p in paths.items()}
                if any(v is None for v in cached.values()):
                    cached = semble.answer(job, tree, semble_names)
                    for r, p in paths.items():
                        _store(p, cached[r])
                answers.update(cached)
            localidx.close()
            for name, answered in answers.items():
                for i, (task, answer) in enumerate(zip(job.tasks, answered)):
                    ndcg, ranks = scoring.score(up, answer["ranked"], task["targets"], files=name.endswith("-files"))
                    rows.append({"id": f"{job.set}/{job.name}/{i}", "set": job.set, "split": job.split,
                                 "repo": job.name,
                                 "language": job.language, "category": task["category"], "query": task["query"],
                                 "retriever": name, "ndcg10": ndcg, "ranks": ranks, "ms": answer["ms"],
                                 "top": answer["ranked"][:scoring.K], "targets": task["targets"]})
            mine = [r for r in rows if r["repo"] == job.name and r["set"] == job.set]
            figures = " ".join(f"{n}={scoring._mean(r['ndcg10'] for r in mine if r['retriever'] == n):.3f}"
                               for n in answers)
            log(f"{job.set}/{job.name} ({job.language}, {len(job.tasks)} questions, "
                f"{time.perf_counter() - started:.0f}s): {figures}")
    finally:
        localidx.close()
    return rows


def report(rows: list[dict], title: str, against: list[dict] | None) -> dict:
    """Print the tables and the paired comparisons; return every figure."""
    names = list(dict.fromkeys(r["retriever"] for r in rows))
    by_name = {n: [r for r in rows if r["retriever"] == n] for n in names}
    if against:
        by_name["before"] = [r for r in against if r["retriever"] == "localidx"]
    figures = {n: scoring.aggregate(rs) for n, rs in by_name.items() if rs}
    scoring.print_tables(title, figures)
    pairs = [(a, b) for a, b in (("localidx", "semble"), ("localidx", "semble-bm25"), ("localidx", "localidx-bm25"),
                                 ("localidx", "before"), ("localidx-bm25", "semble-bm25-plain"))
             if by_name.get(a) and by_name.get(b)]
    paired = {}
    for a, b in pairs:
        paired[f"{a} - {b}"] = scoring.paired(by_name[a], by_name[b])
        scoring.print_paired(f"{a} - {b}", paired[f"{a} - {b}"])
    return {"figures": figures, "paired": paired}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=("shortq", "dev"), default="shortq",
                        help="shortq: the peer's questions (default); dev: the generated set (devset.py)")
    parser.add_argument("--split", choices=("tuning", "heldout", "all"), default="tuning",
                        help="the generated set's half (default tuning)")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"),
                        help="the generated set's repositories: MIRRORS/owner+name/repo git directories")
    parser.add_argument("--semble-bench", type=Path, required=True,
                        help="the peer benchmark's folder: metrics.py, data.py, repos.json, annotations/")
    parser.add_argument("--repos-json", type=Path, default=None, help="default: SEMBLE_BENCH/repos.json")
    parser.add_argument("--annotations", type=Path, default=None, help="default: SEMBLE_BENCH/annotations")
    parser.add_argument("--checkouts", type=Path, default=Path("/work/data/shortq/repos"),
                        help="a folder of git checkouts named as in repos.json (read, never written)")
    parser.add_argument("--work", type=Path, required=True, help="trees, indexes, cached answers, the model")
    parser.add_argument("--repo", action="append", default=[], help="only this repository (repeatable)")
    parser.add_argument("--language", action="append", default=[], help="only this language (repeatable)")
    parser.add_argument("--mode", action="append", choices=MODES, default=None,
                        help="localidx search mode (repeatable; default: hybrid and bm25)")
    parser.add_argument("--files", action="store_true", help="also score `search --files` (files ranked by path)")
    parser.add_argument("--model", default=None, help="embedding model (default: localidx's default, static-minilm)")
    parser.add_argument("--reindex", action="store_true", help="rebuild every localidx index first")
    parser.add_argument("--semble-python", default=None,
                        help="the Python of an environment with semble==0.7.0: run the peer beside localidx")
    parser.add_argument("--against", type=Path, default=None,
                        help="a questions JSONL of an earlier run: pair localidx now against localidx then")
    parser.add_argument("--out", type=Path, default=None,
                        help="per-question JSONL (default: WORK/questions-SET[-SPLIT].jsonl); figures go beside it "
                        "as .json")
    args = parser.parse_args(argv)
    args.mode = args.mode or ["hybrid", "bm25"]
    args.repos_json = args.repos_json or args.semble_bench / "repos.json"
    args.annotations = args.annotations or args.semble_bench / "annotations"
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.basicConfig(level=logging.WARNING)
    up = scoring.load_upstream(args.semble_bench)
    jobs = shortq_jobs(up, args) if args.set == "shortq" else dev_jobs(args)
    log(f"{len(jobs)} repositories" + (f", {sum(len(j.tasks) for j in jobs)} questions" if jobs[0].tasks else ""))
    rows = run_set(jobs, args, up)
    name = args.set if args.set == "shortq" else f"dev-{args.split}"
    out = args.out or args.work / f"questions-{name}.jsonl"
    against = None
    if args.against:
        against = [json.loads(line) for line in args.against.read_text().splitlines() if line.strip()]
        repos = {j.name for j in jobs}
        against = [r for r in against if r["repo"] in repos]
    if args.set == "shortq":
        figures = report(rows, "shortq (the peer's questions)", against)
    else:
        figures = {}
        for half in ("tuning", "heldout"):
            part = [r for r in rows if r["split"] == half]
            if part:
                figures[half] = report(part, f"dev, {half} half (generated questions)",
                                       [r for r in against or [] if r.get("split") == half])
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out.with_suffix(".json").write_text(json.dumps(figures, indent=1))
    log(f"\nper-question rows: {out}; figures: {out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
