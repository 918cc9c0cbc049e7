"""Scoring for the short-question runs: the peer benchmark's own metric code, imported unchanged, and the tables.

The peer benchmark's ``metrics.py`` and ``data.py`` are read from the folder given on the command line (never copied
here). ``metrics.py`` imports ``benchmarks.data`` and ``semble.types``: ``load_upstream`` registers that folder as the
package ``benchmarks`` for those imports and, when semble is not installed in this environment, a stand-in
``semble.types`` whose ``SearchResult`` only names a type (metrics.py uses it in annotations alone). A ranked list
is scored through ``metrics.target_rank`` over objects shaped like the peer's results (``.chunk.file_path``,
``.chunk.start_line``, ``.chunk.end_line``) and ``metrics.ndcg_at_k`` at 10, so a figure here is the peer's figure.

Aggregation follows the peer's summary: a repository's figure is the mean over its questions; the overall figure is
the mean over repositories; a category's is the mean over repositories of their per-category means; a language's is
the mean over its repositories. Paired differences get a bootstrap CI that resamples questions within each
repository (the statistic aggregated the same way) and one that resamples repositories.
"""

from __future__ import annotations

import importlib
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np

K = 10
BOOTSTRAP = 2000
SEED = 20261127


@dataclass(frozen=True)
class Upstream:
    data: types.ModuleType
    metrics: types.ModuleType


def load_upstream(folder: Path) -> Upstream:
    """The peer's ``data`` and ``metrics`` modules from ``folder``, as they are."""
    folder = Path(folder).resolve()
    for name in ("metrics.py", "data.py"):
        if not (folder / name).is_file():
            raise SystemExit(f"{folder}: no {name} here (give the peer benchmark's folder with --semble-bench)")
    saved = {name: sys.modules.get(name) for name in ("benchmarks", "benchmarks.data", "benchmarks.metrics")}
    package = types.ModuleType("benchmarks")
    package.__path__ = [str(folder)]
    sys.modules["benchmarks"] = package
    for name in ("benchmarks.data", "benchmarks.metrics"):
        sys.modules.pop(name, None)
    try:
        importlib.import_module("semble.types")
    except ImportError:
        semble = sys.modules.setdefault("semble", types.ModuleType("semble"))
        stand_in = types.ModuleType("semble.types")
        stand_in.SearchResult = type("SearchResult", (), {})
        semble.types = stand_in
        sys.modules["semble.types"] = stand_in
    try:
        data = importlib.import_module("benchmarks.data")
        metrics = importlib.import_module("benchmarks.metrics")
    finally:
        for name, module in saved.items():  # leave the name ``benchmarks`` as it was for everything else
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    return Upstream(data, metrics)


class _Chunk:
    __slots__ = ("file_path", "start_line", "end_line")

    def __init__(self, file_path: str, start_line: int, end_line: int):
        self.file_path, self.start_line, self.end_line = file_path, start_line, end_line


class _Result:
    __slots__ = ("chunk",)

    def __init__(self, chunk: _Chunk):
        self.chunk = chunk


def score(up: Upstream, ranked: list[list], targets: list[dict], files: bool = False) -> tuple[float, list]:
    """NDCG@10 of one ranked list (``[path, start, end]``, best first) against ``targets`` (``{path, start_line,
    end_line}``, relevant and secondary alike), and each target's rank (None when missed).

    ``files``: the list is a ranked list of files; a target counts by its path alone (``metrics.file_rank``) and
    targets in one file count once, so a perfect file ranking scores 1."""
    if files:
        paths = list(dict.fromkeys(t["path"] for t in targets))
        ranked_paths = [r[0] for r in ranked]
        ranks = [up.metrics.file_rank(ranked_paths[:K], p) for p in paths]
        return up.metrics.ndcg_at_k([r for r in ranks if r is not None], len(paths), K), ranks
    results = [_Result(_Chunk(p, s, e)) for p, s, e in ranked[:K]]
    parsed = [up.data.Target(path=t["path"], start_line=t.get("start_line"), end_line=t.get("end_line"))
              for t in targets]
    ranks = [up.metrics.target_rank(results, t) for t in parsed]
    return up.metrics.ndcg_at_k([r for r in ranks if r is not None], len(parsed), K), ranks


# -- aggregation --------------------------------------------------------------------------------------------------

def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def aggregate(rows: list[dict], key: str = "ndcg10") -> dict:
    """Figures of one retriever's per-question rows (``repo``, ``language``, ``category``, ``key``): overall (mean
    over repositories), by category, by language, by repository, and the mean over languages."""
    by_repo: dict[str, list[dict]] = {}
    for row in rows:
        by_repo.setdefault(row["repo"], []).append(row)
    repo_mean = {repo: _mean(r[key] for r in rs) for repo, rs in by_repo.items()}
    language = {repo: rs[0]["language"] for repo, rs in by_repo.items()}
    categories = sorted({r["category"] for r in rows})
    by_category = {}
    for cat in categories:
        per_repo = [_mean(r[key] for r in rs if r["category"] == cat) for rs in by_repo.values()
                    if any(r["category"] == cat for r in rs)]
        by_category[cat] = _mean(per_repo)
    by_language = {lang: _mean(repo_mean[repo] for repo in repo_mean if language[repo] == lang)
                   for lang in sorted(set(language.values()))}
    return {"overall": _mean(repo_mean.values()), "questions": len(rows), "repos": len(repo_mean),
            "by_category": by_category, "by_language": by_language, "over_languages": _mean(by_language.values()),
            "by_repo": dict(sorted(repo_mean.items()))}


def _stat(groups: list[np.ndarray]) -> float:
    return float(np.mean([g.mean() for g in groups])) if groups else float("nan")


def paired(a: list[dict], b: list[dict], key: str = "ndcg10", seed: int = SEED) -> dict:
    """Paired difference a - b over the questions both answered (matched on ``id``), aggregated as ``aggregate``
    does, with 95% bootstrap CIs: questions resampled within each repository, and repositories resampled.
    Returned for overall, each category and each language."""
    b_by_id = {r["id"]: r for r in b}
    pairs = [(r, b_by_id[r["id"]]) for r in a if r["id"] in b_by_id]
    rng = np.random.default_rng(seed)

    def figure(selected: list[tuple[dict, dict]]) -> dict:
        by_repo: dict[str, list[float]] = {}
        for x, y in selected:
            by_repo.setdefault(x["repo"], []).append(x[key] - y[key])
        groups = [np.array(v) for v in by_repo.values()]
        if not groups:
            return {"diff": float("nan"), "ci_q": (float("nan"),) * 2, "ci_r": (float("nan"),) * 2, "n": 0,
                    "repos": 0, "wins": 0, "losses": 0}
        point = _stat(groups)
        within = np.empty(BOOTSTRAP)
        across = np.empty(BOOTSTRAP)
        for i in range(BOOTSTRAP):
            within[i] = _stat([g[rng.integers(0, len(g), len(g))] for g in groups])
            across[i] = _stat([groups[j] for j in rng.integers(0, len(groups), len(groups))])
        diffs = [x[key] - y[key] for x, y in selected]
        return {"diff": point, "ci_q": tuple(np.percentile(within, [2.5, 97.5]).tolist()),
                "ci_r": tuple(np.percentile(across, [2.5, 97.5]).tolist()), "n": len(selected),
                "repos": len(groups), "wins": sum(d > 1e-9 for d in diffs), "losses": sum(d < -1e-9 for d in diffs)}

    out = {"overall": figure(pairs), "by_category": {}, "by_language": {}}
    for cat in sorted({x["category"] for x, _ in pairs}):
        out["by_category"][cat] = figure([p for p in pairs if p[0]["category"] == cat])
    for lang in sorted({x["language"] for x, _ in pairs}):
        out["by_language"][lang] = figure([p for p in pairs if p[0]["language"] == lang])
    return out


# -- printing -----------------------------------------------------------------------------------------------------

def _cell(value: float) -> str:
    return "" if value != value else f"{value:.3f}"


def print_tables(title: str, figures: dict[str, dict], out=sys.stdout) -> None:
    """Markdown tables of ``aggregate`` figures, one column per retriever: overall, by category, by language, by
    repository."""
    names = list(figures)
    if not names:
        return
    head = "| | " + " | ".join(names) + " |\n|---" + "|---:" * len(names) + "|"
    first = figures[names[0]]
    print(f"\n## {title}: {first['questions']} questions, {first['repos']} repositories, NDCG@10\n", file=out)
    print(head, file=out)
    print("| **overall** (mean over repositories) | " + " | ".join(f"**{_cell(figures[n]['overall'])}**"
                                                               for n in names) + " |", file=out)
    print("| mean over languages | " + " | ".join(_cell(figures[n]["over_languages"]) for n in names) + " |",
          file=out)
    for section, label in (("by_category", "category"), ("by_language", "language"), ("by_repo", "repository")):
        keys = sorted({k for n in names for k in figures[n][section]})
        print(f"\n{head.replace('| |', f'| {label} |', 1)}", file=out)
        for k in keys:
            print(f"| {k} | " + " | ".join(_cell(figures[n][section].get(k, float('nan'))) for n in names) + " |",
                  file=out)


def print_paired(label: str, result: dict, out=sys.stdout) -> None:
    """A paired comparison's table: difference, both CIs, questions won and lost."""
    print(f"\n### paired: {label} (NDCG@10 difference; 95% CI resampling questions within repositories / "
          f"resampling repositories)\n", file=out)
    print("| | diff | CI questions | CI repositories | wins / losses / questions |\n|---|---:|---|---|---|", file=out)

    def line(name: str, f: dict) -> None:
        print(f"| {name} | {f['diff']:+.3f} | [{f['ci_q'][0]:+.3f}, {f['ci_q'][1]:+.3f}] | "
              f"[{f['ci_r'][0]:+.3f}, {f['ci_r'][1]:+.3f}] | {f['wins']} / {f['losses']} / {f['n']} |", file=out)

    line("**overall**", result["overall"])
    for cat, f in result["by_category"].items():
        line(cat, f)
    for lang, f in result["by_language"].items():
        line(lang, f)
