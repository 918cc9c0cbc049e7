"""Benchmark: does the context pack hold the answer, within its budget, as often as plain search hits would?

For questions with known answer places (the generated development set, ``benchmarks/eval/shortq/devset.py``: a
definition's doc sentence -> the definition's lines, a module's header sentence -> the file, a docs sentence -> the
file it names), the pack ``localidx context --max-tokens N`` builds (``build_for_repository``, profile ``balanced``)
at each budget, beside the plain search hits (``search -k 40``) taken in rank order while their chunk text fits the
same budget (a hit that does not fit is skipped, a smaller later one may still come in; only the chunk text is
counted, nothing around it, so the baseline is given more room than the pack has).

Printed per half of the set (tuning, held-out) and budget, the share of questions whose answer is
- ``file``: in an excerpt of the pack (a match's path is the target's);
- ``lines``: in an excerpt whose lines overlap the target's (a module or docs target: its file);
- ``named``: in an excerpt or in the pack's list of other files;
- ``plain``: in the plain hits packed to the budget (``file``; ``plain lines`` as ``lines``);
and ``over``: packs whose printed text (the augmented prompt) or instructions count more cl100k tokens than the
budget (goal 0), with the median tokens.

Also ``--package click`` (watchdog, jsonschema): the paraphrased questions of ``benchmarks/eval/<package>.jsonl``
(answer: a file) over a copy of the installed package's source, as ``run_eval.py`` makes it; ``balanced`` was tuned
on these, so they are reported as their own group.

Repositories come as in the shortq runner: bare git directories brought by ``fetch`` (``--mirrors``, default
``/work/.mirror``: ``owner+name/repo``), read at the pinned revision into ``WORK/trees``; indexes live in
``WORK/index`` and are kept. Universal Ctags makes the questions.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/pack_recall.py --work /tmp/lxpack \
        --repo attrs --repo jinja --repo viper --repo echo [--package click] [--budgets 1000,2000,4000,8000] \
        [--model static-minilm]

Not a timed test: run it, read it, quote it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "eval" / "shortq"))
sys.path.insert(0, str(HERE / "eval"))
sys.path.insert(0, str(HERE.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import run as shortq  # noqa: E402


def _overlaps(item: dict, target: dict) -> bool:
    if item["path"] != target["path"]:
        return False
    if "start_line" not in target:
        return True
    end = target.get("end_line") or target["start_line"]
    return item["start_line"] <= end and target["start_line"] <= item["end_line"]


def _listed(prompt: str) -> set[str]:
    head = "Other files that match, best first (not excerpted):\n"
    if head not in prompt:
        return set()
    lines = prompt.split(head, 1)[1].splitlines()
    return {line[2:].split(" ")[0].rsplit(":", 1)[0] for line in lines if line.startswith("- ")}


def plain_pack(matches: list[dict], budget: int) -> list[dict]:
    """The hits in rank order while their chunk text fits ``budget`` (cl100k), a hit over what is left skipped."""
    from localidx.tokens import count

    kept, used = [], 0
    for m in matches:
        cost = count(m["text"])
        if used + cost <= budget:
            kept.append(m)
            used += cost
    return kept


def measure(index, question: dict, budgets: list[int]) -> dict:
    from localidx.errors import LocalidxError
    from localidx.retrieve.context import build_for_repository
    from localidx.retrieve.search import search_response
    from localidx.tokens import count

    targets = question["targets"]
    row: dict = {"query": question["query"], "category": question["category"]}
    try:
        hits = search_response(index, question["query"], k=40)["matches"]
    except LocalidxError:
        hits = []
    for budget in budgets:
        try:
            pack = build_for_repository(index, question["query"], max_tokens=budget, settings=index.settings)
        except LocalidxError as exc:
            row[budget] = {"error": str(exc)}
            continue
        excerpts = pack["matches"]
        plain = plain_pack(hits, budget)
        tokens = max(count(pack["instructions"]), count(pack["augmentedPrompt"] + "\n"))
        row[budget] = {
            "file": any(m["path"] == t["path"] for m in excerpts for t in targets),
            "lines": any(_overlaps(m, t) for m in excerpts for t in targets),
            "named": any(m["path"] == t["path"] for m in excerpts for t in targets)
            or any(t["path"] in _listed(pack["augmentedPrompt"]) for t in targets),
            "plain": any(m["path"] == t["path"] for m in plain for t in targets),
            "plain_lines": any(_overlaps(m, t) for m in plain for t in targets),
            "tokens": tokens, "over": tokens > budget, "excerpts": len(excerpts), "plain_hits": len(plain),
        }
    return row


def report(rows: list[dict], budgets: list[int], title: str) -> None:
    print(f"\n{title}: {len(rows)} questions")
    print("| budget | file | lines | named | plain | plain lines | over | median tokens | excerpts | plain hits |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for budget in budgets:
        cells = [r[budget] for r in rows if "error" not in r[budget]]
        errors = len(rows) - len(cells)
        n = len(rows) or 1

        def share(key: str) -> str:
            return f"{sum(1 for c in cells if c[key]) / n:.3f}"

        print(f"| {budget} | {share('file')} | {share('lines')} | {share('named')} | {share('plain')} | "
              f"{share('plain_lines')} | {sum(1 for c in cells if c['over'])} | "
              f"{statistics.median(c['tokens'] for c in cells) if cells else 0:.0f} | "
              f"{statistics.mean(c['excerpts'] for c in cells) if cells else 0:.1f} | "
              f"{statistics.mean(c['plain_hits'] for c in cells) if cells else 0:.1f} |"
              + (f" ({errors} refused)" if errors else ""))


def package_rows(package: str, args, budgets: list[int]) -> list[dict]:
    """The rows of ``eval/<package>.jsonl`` over a copy of the installed package (``run_eval.prepare_repo``)."""
    import run_eval

    from localidx.config import load_settings
    from localidx.indexer import run_index
    from localidx.store.index import open_index

    root = run_eval.prepare_repo(package, args.work / "packages")
    overrides = {"home": str(args.work / "packages-home")}
    if args.model:
        overrides["embed_model"] = args.model
    settings = load_settings(root, overrides)
    run_index(root, True, settings, rebuild=True)
    index = open_index(root, True, settings, read_only=True)
    rows = []
    try:
        for record in run_eval.load_set(HERE / "eval" / f"{package}.jsonl"):
            question = {"query": record["query"], "category": "package",
                        "targets": [{"path": path} for path in record["gold"]]}
            row = measure(index, question, budgets)
            row.update(repo=package, split="package sets (tuned on)")
            rows.append(row)
    finally:
        index.close()
    shortq.log(f"  {package}: {len(rows)} questions")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="trees, indexes, question caches, the answers")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--repo", action="append", default=[], help="a repository of the set (repeatable)")
    parser.add_argument("--package", action="append", default=[], help="an eval/<package>.jsonl set (repeatable)")
    parser.add_argument("--split", choices=("tuning", "heldout", "all"), default="all")
    parser.add_argument("--budgets", default="1000,2000,4000,8000")
    parser.add_argument("--model", default=None, help="embedding model (default: localidx's, static-minilm)")
    parser.add_argument("--limit", type=int, default=0, help="at most this many questions per repository")
    args = parser.parse_args()
    args.language = []
    budgets = [int(b) for b in args.budgets.split(",")]
    jobs = shortq.dev_jobs(args) if args.repo or not args.package else []
    runner = shortq.LocalidxRunner(args.work, args.model, reindex=False)
    by_split: dict[str, list[dict]] = {}
    out = args.work / "pack-recall.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as fh:
        for job in jobs:
            tree = shortq.prepare_tree(job, args.work / "trees" / job.set / job.name)
            questions = shortq.dev_questions(job, tree, args.work)
            if args.limit:
                questions = questions[: args.limit]
            index = runner._index(job, tree)  # noqa: SLF001 - the runner's kept index
            try:
                for question in questions:
                    row = measure(index, question, budgets)
                    row.update(repo=job.full_name, split=job.split)
                    by_split.setdefault(job.split, []).append(row)
                    fh.write(json.dumps(row) + "\n")
            finally:
                index.close()
            shortq.log(f"  {job.full_name}: {len(questions)} questions")
        for package in args.package:
            rows = by_split.setdefault("package sets (tuned on)", [])
            for row in package_rows(package, args, budgets):
                rows.append(row)
                fh.write(json.dumps(row) + "\n")
    for split, rows in sorted(by_split.items()):
        report(rows, budgets, f"{split} half")
    report([r for rows in by_split.values() for r in rows], budgets, "all")
    print(f"\nper question: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
