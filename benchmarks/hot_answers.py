"""Benchmark: the answers of warm searches from the in-memory copy against the same searches through LanceDB.

For each repository (``--repo PATH`` or ``--repo PATH=QUESTIONS.jsonl``, the eval's format: one ``{"query": ...}``
a line; without a file, side_by_side.py's 30 questions), indexed first when it is not, every question plus a few
name queries is asked with ``LOCALIDX_HOT=0`` and with the copy (``search_response(index, q, k=10)``, hybrid).
Printed per repository: how many answers are the same JSON byte for byte, how many have the same matches in the
same order, how many have every field but the scores the same, and the largest relative difference of a score
(``score``, ``bm25_score``, ``vector_score``, ``similarity``); and each question whose matches differ.

    HF_HUB_OFFLINE=1 LOCALIDX_EMBED_MODEL=static-minilm .venv/bin/python benchmarks/hot_answers.py \\
        --repo /tmp/click=benchmarks/eval/click.jsonl --repo /tmp/flask

Not a timed test: run it, read it, quote it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("HF_HUB_OFFLINE", "1")

NAME_QUERIES = ["Flask", "ClientSession", "click.option", "Observer", "class Config", "def main"]
SCORES = ("score", "bm25_score", "vector_score", "similarity")


def compare(root: Path, questions: list[str]) -> dict:
    from localidx.config import load_settings
    from localidx.index.indexer import run_index
    from localidx.store import hot
    from localidx.store.index import open_index, pinned

    search_module = importlib.import_module("localidx.retrieve.search")  # the package re-exports search()
    settings = load_settings(root)
    run_index(root, True, settings)
    index = open_index(root, True, settings, read_only=True)
    copy = hot.wait(pinned(index), 1800)
    out = {"repo": root.name, "chunks": copy.size if copy else None, "queries": 0, "same_json": 0, "same_matches": 0,
           "same_but_scores": 0, "largest_score_difference": 0.0, "differ": []}
    for query in questions:
        os.environ["LOCALIDX_HOT"] = "0"
        lance = search_module.search_response(index, query, k=10)
        os.environ["LOCALIDX_HOT"] = "1"
        mine = search_module.search_response(index, query, k=10)
        out["queries"] += 1
        out["same_json"] += json.dumps(lance, sort_keys=True) == json.dumps(mine, sort_keys=True)
        ids = [m["id"] for m in lance["matches"]] == [m["id"] for m in mine["matches"]]
        out["same_matches"] += ids
        strip = lambda answer: [{k: v for k, v in m.items() if k not in SCORES} for m in answer["matches"]]  # noqa: E731
        out["same_but_scores"] += strip(lance) == strip(mine)
        for a, b in zip(lance["matches"], mine["matches"]):
            for name in SCORES:
                if a[name] is not None and b[name] is not None:
                    out["largest_score_difference"] = max(out["largest_score_difference"],
                                                          abs(a[name] - b[name]) / max(abs(a[name]), 1e-9))
        if not ids:
            out["differ"].append(query)
    os.environ.pop("LOCALIDX_HOT", None)
    index.close()
    return out


def main() -> None:
    from side_by_side import QUESTIONS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", action="append", default=[], help="PATH or PATH=QUESTIONS.jsonl (repeatable)")
    args = parser.parse_args()
    if not args.repo:
        parser.error("name at least one --repo")
    for spec in args.repo:
        path, _eq, questions_file = spec.partition("=")
        questions = [json.loads(line)["query"] for line in Path(questions_file).read_text(encoding="utf-8").splitlines()
                     if line.strip()] if questions_file else list(QUESTIONS)
        print(json.dumps(compare(Path(path), questions + NAME_QUERIES)), flush=True)


if __name__ == "__main__":
    main()
