"""Benchmark: how fast each embedding option makes a cold index hybrid-ready, and what retrieval quality it gives.

The embedding options side by side in one run (timings on a shared machine are noisy: compare the options of
one run as ratios, and read CPU-seconds, which contention does not inflate much):

1. ``build``: the static tables the options need, built into the user cache (``LOCALIDX_CACHE_DIR``) once; the
   default table's build from scratch is timed (wall, CPU-s).
2. ``speed``: per option, one fresh process: load, one warm-up call, then ``embed`` over ``--chunks`` real chunks
   (a seeded sample of the standard library's chunks of every kind, each ``embedding_input(search_text)``, exactly
   what the indexer sends); chunks/s (wall), CPU-seconds per 1,000 chunks, peak RSS, load time, and the median
   ``embed_query`` time over 30 questions (what a warm daemon pays per query).
3. ``ort``: the transformer under ONNX Runtime settings (threads, graph optimisation, CPU arena, batch size), and
   fastembed for reference, over ``--ort-chunks`` chunks.
4. ``quality``: ``eval/run_eval.py`` per option in its own process (it indexes copies of click, jsonschema and
   watchdog; ``--set JSONL=REPO`` adds sets such as the bug-report ones): Recall@1, Recall@5 and MRR for the vector
   arm alone and for hybrid search with the default fusion (linear, vector weight 0.5); BM25 alone for reference.
5. ``kinds``: the same eval with the vector arm blind to one group of chunk kinds at a time (as if those chunks had
   no vector; BM25 still sees them): do vectors of file summaries, config keys, module code or data/text windows
   help?

6. ``cold`` (``--repo PATH``, a git repository at a fixed commit): one real ``localidx index`` of it with the default
   model into a fresh state directory, stderr read as a log (one line per phase, ``LOCALIDX_PROGRESS_S=1``): when
   each phase ended (files found, files chunked, BM25-ready: rows written and searchable, hybrid-ready: every vector),
   the run's write/embed split, chunks, and the peak RSS of any process of the run. ``--fresh-table`` also builds the
   static table from scratch (a first run on a new machine) in an empty cache.

Then the tables: option, chunks/s, CPU-s per 1k chunks, R@1 and MRR per set and mode, and the "static first,
transformer later" row, derived from the two it combines (hybrid-ready at the static pace, at the static quality
until the transformer pass ends). Every figure also goes to ``--out`` (JSON); ``--reuse`` reads the quality runs
already there instead of running them again.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/coldindex.py                   # everything: about 40 min here
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/coldindex.py --sections speed,ort --chunks 3000
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/coldindex.py --sections quality,kinds --reuse \\
        --set bugreports/NAME.jsonl=/path/to/clone

Not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _corpus import WORK, cpu_self, in_child, loadavg, peak_rss_mb, stdlib_chunks  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TRANSFORMER = "sentence-transformers/all-MiniLM-L6-v2"
# (label, embed_model name, extra): the options compared. "fastembed" runs the default model through fastembed,
# for speed only (its vectors are the transformer's). env: variables set in the option's process before imports.
OPTIONS = [
    ("transformer, cap 256 (today's default)", TRANSFORMER, {}),
    ("transformer, cap 128", TRANSFORMER + "[cap=128]", {}),
    ("static 256d, Zipf (static default)", "static-minilm", {}),
    ("static 384d, Zipf", "static-minilm[dim=384]", {}),
    ("static 128d, Zipf", "static-minilm[dim=128]", {}),
    ("static 256d, SIF code counts a=1e-3", "static-minilm[weight=sif]", {}),
    ("static 256d, SIF code counts a=1e-4", "static-minilm[weight=sif,a=0.0001]", {}),
    ("static 256d, SIF vocab rank a=1e-4", "static-minilm[weight=sif-rank,a=0.0001]", {}),
    ("static 256d, IDF code counts", "static-minilm[weight=idf]", {}),
    ("static 256d, unweighted", "static-minilm[weight=none]", {}),
    ("static 256d, Zipf, token output", "static-minilm[source=token]", {}),
    ("static 256d, Zipf, no camelCase split", "static-minilm[split=0]", {}),
    ("static 256d, Zipf, 256-piece cap", "static-minilm[max=256]", {}),
]
SPEED_ONLY = [
    ("static 256d, one core (tokenizer not parallel)", "static-minilm", {"env": {"TOKENIZERS_PARALLELISM": "false"}}),
]
ORT_GRID = [  # (label, TransformerEmbedder keyword arguments, or "fastembed")
    ("raw ORT: default threads, batch 16, graph all, arena on", {}),
    ("threads 1", {"threads": 1}),
    ("threads 2", {"threads": 2}),
    ("threads 2, no spinning", {"threads": 2, "spinning": False}),
    ("threads 1, batch 8", {"threads": 1, "batch": 8}),
    ("graph basic", {"graph_level": "basic"}),
    ("graph extended", {"graph_level": "extended"}),
    ("arena off", {"arena": False}),
    ("batch 1", {"batch": 1}),
    ("batch 4", {"batch": 4}),
    ("batch 8", {"batch": 8}),
    ("batch 32", {"batch": 32}),
    ("fastembed (batch 16)", "fastembed"),
]
KIND_GROUPS = [("summary",), ("config",), ("module",), ("window", "content", "heading")]
EVAL_SETUPS = "bm25,vector,linear w=0.5"
MODES = (("vector", "vector"), ("hybrid", "linear w=0.5"))
QUESTIONS = [
    "where does click decide which shell completion script to emit",
    "how is the observer thread stopped and joined",
    "validate a JSON instance against a draft 7 schema",
    "password typed at a hidden prompt shows up in the validation error message",
    "retry the request when the connection drops",
    "parse a date string with a timezone offset",
] * 5


# -- processes ------------------------------------------------------------------------------------------------


def _embedder(model: str, ort: dict | str | None = None):
    if ort == "fastembed":
        from localidx.embed.onnx import FastEmbedder

        return FastEmbedder(TRANSFORMER)
    if ort:
        from localidx.embed.transformer import TransformerEmbedder

        return TransformerEmbedder(**ort)
    from localidx.embed import get_embedder

    return get_embedder(model)


def _speed_child(model: str, extra: dict, texts: list[str], queue) -> None:
    for key, value in extra.get("env", {}).items():
        os.environ[key] = value
    t0 = time.perf_counter()
    embedder = _embedder(model, extra.get("ort"))
    embedder._load()
    load_s = time.perf_counter() - t0
    embedder.embed(texts[:16])  # first run allocates (ORT arena, page-in of the table): not steady throughput
    cpu0, t0 = cpu_self(), time.perf_counter()
    vectors = embedder.embed(texts)
    wall, cpu = time.perf_counter() - t0, cpu_self() - cpu0
    times = []
    for q in QUESTIONS:
        q0 = time.perf_counter()
        embedder.embed_query(q)
        times.append(time.perf_counter() - q0)
    queue.put({"n": len(vectors), "dim": int(vectors.shape[1]), "load_s": load_s, "wall_s": wall, "cpu_s": cpu,
               "rss_mb": peak_rss_mb(), "query_ms": 1000 * statistics.median(times),
               "model_id": embedder.model_id, "provider": getattr(embedder, "provider", None)})


def _build_child(names: list[str], queue) -> None:
    """Build every static table that is missing, one vocabulary pass per token source; time the first pass."""
    from localidx.embed.static import StaticSpec, ensure_table, table_path, token_outputs

    specs = [StaticSpec.parse(n) for n in names]
    out: dict = {"built": [], "cached": []}
    raws: dict = {}
    for spec in specs:
        if table_path(spec).exists():
            out["cached"].append(spec.name)
            continue
        if spec.source not in raws:
            cpu0, t0 = cpu_self(), time.perf_counter()
            raws[spec.source] = token_outputs(spec.source)
            out.setdefault("vocab_pass", {"wall_s": time.perf_counter() - t0, "cpu_s": cpu_self() - cpu0})
        cpu0, t0 = cpu_self(), time.perf_counter()
        ensure_table(spec, raw=raws[spec.source])
        out.setdefault("pca_weight_save", {"wall_s": time.perf_counter() - t0, "cpu_s": cpu_self() - cpu0})
        out["built"].append(spec.name)
    queue.put(out)


# -- sections -------------------------------------------------------------------------------------------------


def _speed_line(label: str, r: dict) -> str:
    return (f"{label:<44} {r['n'] / r['wall_s']:9.1f} chunks/s  {1000 * r['cpu_s'] / r['n']:8.2f} CPU-s/1k  "
            f"load {r['load_s']:5.2f} s  query {r['query_ms']:6.2f} ms  RSS {r['rss_mb']:5.0f} MB")


def section_speed(texts: list[str], report: dict, options) -> None:
    print(f"\n## speed: {len(texts)} chunks, one fresh process per option (load avg {loadavg()})")
    for label, model, extra in options:
        n = len(texts) if not model.startswith(TRANSFORMER) else min(len(texts), report["transformer_chunks"])
        r = in_child(_speed_child, model, extra, texts[:n])
        report["speed"][label] = r
        print(_speed_line(label, r), flush=True)


def section_ort(texts: list[str], report: dict, only: str = "") -> None:
    print(f"\n## ONNX Runtime settings: transformer cap 256, {len(texts)} chunks (load avg {loadavg()})")
    for label, kwargs in ORT_GRID:
        if only and not any(w.strip() and w.strip() in label for w in only.split(",")):
            continue
        r = in_child(_speed_child, TRANSFORMER, {"ort": kwargs}, texts)
        report["ort"][label] = r
        print(_speed_line(label, r), flush=True)


def run_quality(model: str, args, tag: str, skip_kinds: tuple = ()) -> dict:
    """run_eval.py for ``model`` in its own process; its JSON figures (read back when ``--reuse`` finds them)."""
    out = args.work / f"quality-{tag}.json"
    if args.reuse and out.exists():
        return json.loads(out.read_text())
    command = [sys.executable, str(HERE / "eval" / "run_eval.py"), *args.packages, "--model", model,
               "--work", str(args.work / "eval"), "--only", EVAL_SETUPS, "--json", str(out)]
    for extra in args.set:
        command += ["--set", extra]
    if skip_kinds:
        command += ["--vector-skip-kinds", ",".join(skip_kinds)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"run_eval failed for {model}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    figures = json.loads(out.read_text())
    figures["eval_s"] = time.perf_counter() - started
    out.write_text(json.dumps(figures, indent=1))
    return figures


def _cells(figures: dict, metrics=("recall@1", "mrr")) -> dict:
    """{set: {mode: {metric: value}}} plus "all" (query-weighted)."""
    out: dict = {}
    total = sum(s["queries"] for s in figures["sets"].values())
    for name, data in figures["sets"].items():
        out[name] = {mode: {m: data["setups"][setup][m] for m in metrics} for mode, setup in MODES}
        out[name]["bm25"] = {m: data["setups"]["bm25"][m] for m in metrics}
    out["all"] = {mode: {m: sum(figures["sets"][n]["setups"][setup][m] * figures["sets"][n]["queries"]
                                for n in figures["sets"]) / total for m in metrics}
                  for mode, setup in (*MODES, ("bm25", "bm25"))}
    return out


def section_quality(report: dict, args, options) -> None:
    print(f"\n## quality (run_eval: {EVAL_SETUPS}; sets {' '.join(args.packages) or 'all'} {' '.join(args.set)})")
    for label, model, _extra in options:
        tag = model.replace("/", "_").replace("[", "(").replace("]", ")").replace("=", "-").replace(",", "+")
        figures = run_quality(model, args, tag)
        report["quality"][label] = figures
        cells = _cells(figures, ("recall@1", "recall@5", "mrr"))
        print(f"{label:<44} " + "  ".join(
            f"{name} vec {c['vector']['recall@1']:.3f}/{c['vector']['mrr']:.3f} "
            f"hyb {c['hybrid']['recall@1']:.3f}/{c['hybrid']['mrr']:.3f}" for name, c in cells.items()), flush=True)


def section_kinds(report: dict, args, models) -> None:
    print("\n## kinds: the vector arm blind to one group of kinds at a time (hybrid R@1 / MRR, all sets)")
    for label, model in models:
        tag = model.replace("/", "_").replace("[", "(").replace("]", ")").replace("=", "-").replace(",", "+")
        base = _cells(run_quality(model, args, tag))["all"]["hybrid"]
        rows = {"all kinds": base}
        for group in KIND_GROUPS:
            figures = run_quality(model, args, f"{tag}-skip-{'+'.join(group)}", skip_kinds=group)
            rows["without " + "+".join(group)] = _cells(figures)["all"]["hybrid"]
        report["kinds"][label] = rows
        print(f"{label}: " + "; ".join(f"{k} {v['recall@1']:.3f}/{v['mrr']:.3f}" for k, v in rows.items()))


# -- the tables -----------------------------------------------------------------------------------------------


def print_tables(report: dict) -> None:
    speed, quality = report["speed"], report["quality"]
    labels = [label for label in list(speed) + list(quality) if label in speed or label in quality]
    labels = list(dict.fromkeys(labels))
    sets = next((list(_cells(q)) for q in quality.values()), [])
    print("\n## the table: speed, and R@1 / MRR per set for hybrid (default fusion) and the vector arm alone\n")
    head = ["option", "chunks/s", "CPU-s per 1k"]
    for name in sets:
        head += [f"{name} hybrid R@1", f"{name} hybrid MRR"]
    head += ["all vector R@1", "all vector MRR"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    rows = []
    for label in labels:
        s, q = speed.get(label), quality.get(label)
        cells = _cells(q) if q else None
        row = [label, f"{s['n'] / s['wall_s']:.1f}" if s else "", f"{1000 * s['cpu_s'] / s['n']:.2f}" if s else ""]
        for name in sets:
            row += [f"{cells[name]['hybrid']['recall@1']:.3f}", f"{cells[name]['hybrid']['mrr']:.3f}"] if cells \
                else ["", ""]
        row += [f"{cells['all']['vector']['recall@1']:.3f}", f"{cells['all']['vector']['mrr']:.3f}"] if cells \
            else ["", ""]
        rows.append(row)
    static_label, transformer_label = "static 256d, Zipf (static default)", OPTIONS[0][0]
    if all(x in speed and x in quality for x in (static_label, transformer_label)):
        s, t = speed[static_label], speed[transformer_label]
        cpu = s["cpu_s"] / s["n"] + t["cpu_s"] / t["n"]
        cells_s, cells_t = _cells(quality[static_label]), _cells(quality[transformer_label])
        row = ["static first, transformer later", f"{s['n'] / s['wall_s']:.1f} (to hybrid-ready)",
               f"{1000 * cpu:.2f} (both passes)"]
        for name in sets:
            row += [f"{cells_s[name]['hybrid']['recall@1']:.3f} -> {cells_t[name]['hybrid']['recall@1']:.3f}",
                    f"{cells_s[name]['hybrid']['mrr']:.3f} -> {cells_t[name]['hybrid']['mrr']:.3f}"]
        row += [f"{cells_s['all']['vector']['recall@1']:.3f} -> {cells_t['all']['vector']['recall@1']:.3f}",
                f"{cells_s['all']['vector']['mrr']:.3f} -> {cells_t['all']['vector']['mrr']:.3f}"]
        rows.append(row)
    if quality:
        any_q = next(iter(quality.values()))
        cells = _cells(any_q)
        row = ["BM25 alone (no vectors)", "", ""]
        for name in sets:
            row += [f"{cells[name]['bm25']['recall@1']:.3f}", f"{cells[name]['bm25']['mrr']:.3f}"]
        rows.append(row + ["", ""])
    for row in rows:
        print("| " + " | ".join(row) + " |")


def section_cold(repo: Path, work: Path, fresh_table: bool, model: str = "") -> dict:
    """Time one real cold ``localidx index`` of ``repo`` phase by phase from its stderr (a pipe, so a log's lines)."""
    import re
    import shutil
    import subprocess

    home = work / "cold-home"
    shutil.rmtree(home, ignore_errors=True)
    env = dict(os.environ, LOCALIDX_HOME=str(home), LOCALIDX_PROGRESS_S="1", LOCALIDX_WATCH="0")
    if model:
        env["LOCALIDX_EMBED_MODEL"] = model
    if fresh_table:
        shutil.rmtree(work / "cold-cache", ignore_errors=True)
        env["LOCALIDX_CACHE_DIR"] = str(work / "cold-cache")
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=repo, capture_output=True,
                            text=True).stdout.strip()
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "localidx", "index", str(repo)], cwd=repo, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    marks: dict = {}
    for line in proc.stderr:
        at = round(time.perf_counter() - started, 2)
        if re.match(r"\d+ files", line):
            marks.setdefault("files_found_s", at)
        elif re.match(r"chunking (\d+)/\1 files", line):
            marks["chunked_s"] = at
        elif "searchable now (BM25)" in line:
            marks["bm25_ready_s"] = at
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    marks["hybrid_ready_s"] = round(time.perf_counter() - started, 2)
    chunks = re.search(r"chunks: (\d+) written", out)
    split = re.search(r"\(write ([\d.]+) s, embed ([\d.]+) s", out)
    return {"repo": str(repo), "commit": commit, "exit": os.waitstatus_to_exitcode(status), **marks,
            "chunks": int(chunks.group(1)) if chunks else None,
            "write_s": float(split.group(1)) if split else None, "embed_s": float(split.group(2)) if split else None,
            "peak_rss_mb": round(usage.ru_maxrss / 1024), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "fresh_table": fresh_table, "loadavg": loadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default="build,speed,ort,quality,kinds")
    parser.add_argument("--chunks", type=int, default=3000, help="chunks embedded per static option")
    parser.add_argument("--transformer-chunks", type=int, default=400, help="chunks per transformer option")
    parser.add_argument("--ort-chunks", type=int, default=300)
    parser.add_argument("--ort-only", default="", help="comma-separated substrings of ORT setting labels to run")
    parser.add_argument("--options", default="", help="comma-separated substrings of option labels to run")
    parser.add_argument("--packages", nargs="*", default=[], help="run_eval's package sets (default: all)")
    parser.add_argument("--set", action="append", default=[], metavar="JSONL=REPO", help="an extra eval set")
    parser.add_argument("--work", type=Path, default=WORK / "coldindex")
    parser.add_argument("--reuse", action="store_true", help="reuse quality figures already in --work")
    parser.add_argument("--out", type=Path, default=None, help="every figure as JSON (default: <work>/report.json)")
    parser.add_argument("--repo", type=Path, default=None, help="cold: the git repository to index (at its HEAD)")
    parser.add_argument("--fresh-table", action="store_true", help="cold: build the static table from scratch too")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    args.work.mkdir(parents=True, exist_ok=True)
    out = args.out or args.work / "report.json"
    report: dict = {"cores": len(os.sched_getaffinity(0)), "loadavg_start": loadavg(), "speed": {}, "ort": {},
                    "quality": {}, "kinds": {}, "transformer_chunks": args.transformer_chunks}
    if out.exists() and args.reuse:
        old = json.loads(out.read_text())
        for key in ("speed", "ort", "build"):
            if key in old and key.split(",")[0] not in sections:
                report[key] = old[key]
    wanted = [w.strip() for w in args.options.split(",") if w.strip()]
    options = [o for o in OPTIONS if not wanted or any(w in o[0] or w == o[1] for w in wanted)]
    print(f"cores {report['cores']}, load average {report['loadavg_start']}, "
          f"cache {os.environ.get('LOCALIDX_CACHE_DIR') or '~/.cache/localidx'}")

    if "cold" in sections:
        if args.repo is None:
            parser.error("the cold section needs --repo PATH")
        c = report["cold"] = section_cold(args.repo.resolve(), args.work, args.fresh_table)
        print(f"\n## cold index of {c['repo']} at {c['commit']} (default model; exit {c['exit']}, load {c['loadavg']})")
        print(f"{c['chunks']} chunks; files found {c.get('files_found_s')} s, chunked {c.get('chunked_s')} s, "
              f"BM25-ready {c.get('bm25_ready_s')} s, hybrid-ready {c['hybrid_ready_s']} s "
              f"(the run's write {c['write_s']} s, embed {c['embed_s']} s); peak RSS {c['peak_rss_mb']} MB, "
              f"{c['cpu_s']} CPU-s")
    if "build" in sections:
        names = [m for _, m, _ in options + SPEED_ONLY if m.startswith("static-minilm")]
        report["build"] = in_child(_build_child, names)
        b = report["build"]
        print(f"\n## build: {len(b['built'])} static tables built, {len(b['cached'])} already cached")
        if "vocab_pass" in b:
            print(f"vocabulary pass (30,522 tokens through the transformer): {b['vocab_pass']['wall_s']:.1f} s wall, "
                  f"{b['vocab_pass']['cpu_s']:.1f} CPU-s; PCA + weights + save: "
                  f"{b['pca_weight_save']['wall_s']:.1f} s wall, {b['pca_weight_save']['cpu_s']:.1f} CPU-s")
    if sections & {"speed", "ort"}:
        from localidx.embed import embedding_input

        t0 = time.perf_counter()
        chunks = stdlib_chunks(max(args.chunks, args.transformer_chunks, args.ort_chunks), every=2, code_only=False)
        texts = [embedding_input(c.search_text) for c in chunks]
        print(f"\ncorpus: {len(texts)} stdlib chunks of every kind, mean {statistics.mean(map(len, texts)):.0f} "
              f"chars, prepared in {time.perf_counter() - t0:.0f} s")
        if "speed" in sections:
            section_speed(texts, report, options + [o for o in SPEED_ONLY if not wanted or any(
                w in o[0] for w in wanted)])
        if "ort" in sections:
            section_ort(texts[: args.ort_chunks], report, args.ort_only)
    if "quality" in sections:
        section_quality(report, args, options)
    if "kinds" in sections:
        models = [(label, model) for label, model, _ in options
                  if label in (OPTIONS[0][0], "static 256d, Zipf (static default)")]
        section_kinds(report, args, models)
    report["loadavg_end"] = loadavg()
    out.write_text(json.dumps(report, indent=1, default=str))
    print_tables(report)
    print(f"\nload average at end {report['loadavg_end']}; every figure in {out}")


if __name__ == "__main__":
    main()
