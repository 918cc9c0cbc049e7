"""The real-issue development set: public code-localization datasets read at run time, their instances selected,
their gold answers derived from the gold patches, and a fixed split of repositories into a tuning and a held-out half.

Place in the flow: a benchmark input (``run.py`` scores retrieve on it); nothing here is part of localidx. No issue
text is ever written into the repository: the datasets are read from bare git mirrors of their public repositories
(the search tool's ``fetch github:owner/name`` leaves one in ``/work/.mirror/owner+name/repo``) and what this module
derives is cached in the work directory only.

Sources (each read with ``git show COMMIT:PATH`` from its mirror, so a later commit deleting a file does not matter):
- SWE-bench (``SWE-bench/SWE-bench``): the development split and the Lite and Verified test splits (parquet);
- Loc-Bench V1 (``ITMO-NSS-team/chronorepo_icdm26``: ``data/locbench.jsonl``);
- Multi-SWE-bench (``kuppireddypravalika/MSWE-validation-dataset``: one JSONL per repository).

Selection: the repositories of ``PYTHON_REPOS`` and ``MSWE_REPOS`` (each fetched as a mirror as well, for its code),
never one of ``EXCLUDED`` (kept aside for an independent check: their instances are not read at all). Duplicates (the
same instance in two SWE-bench splits) count once. An instance is kept when its base commit is in the mirror and its
gold patch changes at least one gold file.

Gold (the same rule as ``benchmarks/eval/bugreports/gold.py``, from the patch text instead of a fix commit):
- files: those the gold patch modifies that exist at the base commit and are source code (``gold.is_source``: a
  language localidx parses, not tests, docs, examples or changelogs);
- functions: ``path::qualified.symbol`` of the innermost definition (localidx's own parser, at the base commit)
  around each line the patch removes or changes; an insertion counts for the definition around the line before it.

A repository with more than ``MAX_PER_REPO`` instances keeps the ``MAX_PER_REPO`` whose sha256 of ``SAMPLE_SEED`` +
instance id is smallest, so that one repository does not outweigh the others (nor the run time).

Split: by repository, ``split_of``: sha256 of ``SPLIT_SEED + "owner/name"``, even -> tuning, odd -> held-out.
The rule and its seed were fixed before any ranking was tuned; changing them invalidates every figure.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "bugreports"))

from gold import is_source  # noqa: E402

SPLIT_SEED = "localidx-split-1:"
SAMPLE_SEED = "localidx-sample-1:"
MAX_PER_REPO = 30  # a repository with more instances keeps a seeded sample of this many (sympy has 137)
SPLITS = ("tuning", "heldout")

SWE_BENCH = ("SWE-bench/SWE-bench", "9fa561428aeef6406f534c8370c670f9ce51c630",
             ["data/SWE-bench/dev.parquet", "data/SWE-bench_Lite/dev.parquet", "data/SWE-bench_Lite/test.parquet",
              "data/SWE-bench_Verified/test.parquet"])
LOC_BENCH = ("ITMO-NSS-team/chronorepo_icdm26", "ff6efadabca2f2930ffae9001c7e42f073413c12", "data/locbench.jsonl")
MSWE = ("kuppireddypravalika/MSWE-validation-dataset", "f3788671b1be72292be1b3dfc61063f97dd474a0",
        "MSWE-agent/data/{file}_dataset.jsonl")

EXCLUDED = frozenset(r.lower() for r in (
    "astropy/astropy", "mwaskom/seaborn", "pallets/flask", "psf/requests", "pydata/xarray", "pylint-dev/pylint",
    "pytest-dev/pytest", "sphinx-doc/sphinx", "jqlang/jq", "fmtlib/fmt", "google/gson", "sharkdp/bat",
    "tokio-rs/tokio"))

PYTHON_REPOS = ["sympy/sympy", "pvlib/pvlib-python", "pydicom/pydicom", "sqlfluff/sqlfluff", "pylint-dev/astroid",
                "yt-dlp/yt-dlp", "dask/dask"]
# repository (as GitHub spells it) -> (language, the dataset's file under MSWE's data/)
MSWE_REPOS = {
    "facebook/zstd": ("c", "c/facebook__zstd"),
    "nlohmann/json": ("cpp", "cpp/nlohmann__json"),
    "simdjson/simdjson": ("cpp", "cpp/simdjson__simdjson"),
    "catchorg/Catch2": ("cpp", "cpp/catchorg__Catch2"),
    "grpc/grpc-go": ("go", "go/grpc__grpc-go"),
    "zeromicro/go-zero": ("go", "go/zeromicro__go-zero"),
    "FasterXML/jackson-core": ("java", "java/fasterxml__jackson-core"),
    "iamkun/dayjs": ("javascript", "js/iamkun__dayjs"),
    "anuraghazra/github-readme-stats": ("javascript", "js/anuraghazra__github-readme-stats"),
    "BurntSushi/ripgrep": ("rust", "rust/BurntSushi__ripgrep"),
    "sharkdp/fd": ("rust", "rust/sharkdp__fd"),
    "tokio-rs/tracing": ("rust", "rust/tokio-rs__tracing"),
}
CACHE_VERSION = 1
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_DIFF = re.compile(r"^diff --git a/(.+?) b/(.+)$")


def split_of(repo: str) -> str:
    """``tuning`` or ``heldout``: the parity of sha256(``SPLIT_SEED`` + repository)."""
    return SPLITS[int(hashlib.sha256((SPLIT_SEED + repo).encode()).hexdigest(), 16) % 2]


class MissingMirror(Exception):
    """A dataset or repository has not been fetched into the mirror directory."""


def mirror_of(mirror: Path, repo: str) -> Path:
    path = mirror / repo.replace("/", "+") / "repo"
    if not path.is_dir():
        raise MissingMirror(f"{repo}: no mirror at {path} (fetch github:{repo} with the search tool first)")
    return path


def _show(git_dir: Path, commit: str, path: str) -> bytes:
    return subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], check=True,
                          capture_output=True).stdout


# -- reading the datasets -------------------------------------------------------------------------------------------


def _raw_instances(mirror: Path) -> list[dict]:
    """{"id", "repo", "language", "base", "query", "patch", "source"} of every selected instance, excluded
    repositories dropped before anything else is read of them."""
    import io

    import pyarrow.parquet as pq

    wanted = {r.lower(): r for r in PYTHON_REPOS}
    out: dict[str, dict] = {}
    repo, commit, paths = SWE_BENCH
    for path in paths:
        table = pq.read_table(io.BytesIO(_show(mirror_of(mirror, repo), commit, path)),
                              columns=["repo", "instance_id", "base_commit", "problem_statement", "patch"])
        for row in table.to_pylist():
            name = wanted.get(row["repo"].lower())
            if name and row["repo"].lower() not in EXCLUDED:
                out.setdefault(row["instance_id"], {
                    "id": row["instance_id"], "repo": name, "language": "python", "base": row["base_commit"],
                    "query": row["problem_statement"], "patch": row["patch"], "source": path.split("/")[1]})
    repo, commit, path = LOC_BENCH
    for line in _show(mirror_of(mirror, repo), commit, path).decode("utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        name = wanted.get(row["repo"].lower())
        if name and row["repo"].lower() not in EXCLUDED:
            out.setdefault(row["instance_id"], {
                "id": row["instance_id"], "repo": name, "language": "python", "base": row["base_commit"],
                "query": row["problem_statement"], "patch": row["patch"], "source": "locbench"})
    repo, commit, template = MSWE
    for name, (language, file) in MSWE_REPOS.items():
        if name.lower() in EXCLUDED:
            continue
        for line in _show(mirror_of(mirror, repo), commit, template.format(file=file)).decode("utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            issues = row.get("resolved_issues") or []
            query = "\n\n".join(f"{i.get('title') or ''}\n{i.get('body') or ''}".strip() for i in issues).strip()
            if not query:
                continue
            out.setdefault(row["instance_id"], {
                "id": row["instance_id"], "repo": name, "language": language, "base": row["base"]["sha"],
                "query": query, "patch": row["fix_patch"], "source": "multi-swe-bench"})
    return list(out.values())


# -- gold -----------------------------------------------------------------------------------------------------------


def patch_changes(patch: str) -> dict[str, set[int]]:
    """{path: lines of the file before the patch that it removes or changes (an insertion: the line before it)}
    for every file the patch modifies (new files are left out: they do not exist at the base)."""
    files: dict[str, set[int]] = {}
    current: str | None = None
    for line in patch.splitlines():
        m = _DIFF.match(line)
        if m:
            current = m.group(1)
            files[current] = set()
            continue
        if current is None:
            continue
        if line.startswith("--- /dev/null") or line.startswith("new file mode"):
            files.pop(current, None)
            current = None
            continue
        m = _HUNK.match(line)
        if m:
            start, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
            files[current].update({max(start, 1)} if count == 0 else range(start, start + count))
    return files


def gold_of(git_dir: Path, base: str, patch: str) -> tuple[list[str], list[str]]:
    """(gold files, gold functions) of a patch at ``base`` (see the module docstring)."""
    from localidx.chunk.parse import parse
    from localidx.languages import language_for_path

    files, functions = [], []
    for path, lines in patch_changes(patch).items():
        if not is_source(path):
            continue
        try:
            data = _show(git_dir, base, path)
        except subprocess.CalledProcessError:
            continue  # not at the base commit
        files.append(path)
        try:
            parsed = parse(language_for_path(path), data, timeout_s=30)
        except Exception:  # a file the parser cannot read still counts as a gold file  # noqa: BLE001
            continue
        found: dict[str, None] = {}
        for line in sorted(lines):
            around = [s for s in parsed.symbols if s.kind != "module" and s.start_line <= line <= s.end_line]
            if around:
                inner = min(around, key=lambda s: s.end_line - s.start_line)
                found.setdefault(f"{path}::{inner.qualified or inner.name}", None)
        functions.extend(found)
    return files, functions


def _commit_time(git_dir: Path, commit: str) -> int | None:
    done = subprocess.run(["git", "--git-dir", str(git_dir), "show", "-s", "--format=%ct", f"{commit}^{{commit}}"],
                          capture_output=True, text=True)
    return int(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def load(mirror: Path, work: Path, log=print) -> list[dict]:
    """Every selected instance with its gold, split and base-commit time, sorted by repository and time; built once
    and cached in ``work``/instances.jsonl (issue texts stay in the work directory)."""
    cache = work / "instances.jsonl"
    if cache.exists():
        rows = [json.loads(line) for line in cache.read_text(encoding="utf-8").splitlines() if line.strip()]
        if rows and rows[0].get("cache_version") == CACHE_VERSION:
            return capped(rows)
    work.mkdir(parents=True, exist_ok=True)
    rows, dropped = [], {"no base commit": 0, "no gold file": 0}
    for raw in _raw_instances(mirror):
        git_dir = mirror_of(mirror, raw["repo"])
        when = _commit_time(git_dir, raw["base"])
        if when is None:
            dropped["no base commit"] += 1
            continue
        files, functions = gold_of(git_dir, raw["base"], raw.pop("patch"))
        if not files:
            dropped["no gold file"] += 1
            continue
        rows.append({"cache_version": CACHE_VERSION, **raw, "split": split_of(raw["repo"]), "time": when,
                     "gold_files": files, "gold_functions": functions})
    rows.sort(key=lambda r: (r["repo"], r["time"], r["id"]))
    cache.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    log(f"{len(rows)} instances kept; dropped: {dropped}")
    return capped(rows)


def capped(rows: list[dict]) -> list[dict]:
    """``rows`` with at most ``MAX_PER_REPO`` instances per repository (a seeded sample), order kept."""
    by_repo: dict[str, list[dict]] = {}
    for row in rows:
        by_repo.setdefault(row["repo"], []).append(row)
    kept = set()
    for group in by_repo.values():
        group = sorted(group, key=lambda r: hashlib.sha256((SAMPLE_SEED + r["id"]).encode()).hexdigest())
        kept.update(r["id"] for r in group[:MAX_PER_REPO])
    return [r for r in rows if r["id"] in kept]
