"""Redaction: recall on generated secrets, what a real index stores and serves, false positives and speed on real code.

    python benchmarks/redaction.py [--corpus DIR ...] [--max-mb-per-repo 4] [--detect-secrets-python PATH]
    python benchmarks/redaction.py --worst-cases [CHARS ...]

1. Recall. ``tests/secret_shapes.py`` makes secrets at random in the published shapes of over 50 providers'
   credentials and the usual passwords (over 600 strings, 72 shapes), placed in the lines people leave them in,
   across 16 kinds of file (Python, JavaScript, Java, PHP, Terraform, YAML, .env, JSON, shell, INI, TOML, Dockerfile,
   Markdown, a hosts list, PuTTY .ppk, PEM). A secret is
   caught when none of its probes (the value, and a middle piece of a long one) is left in the redacted text.
2. Stored and served. The files are committed to a git repository and indexed by the real CLI (secret files opted
   in, the fake embedder); every probe is looked for in the answers of ``search --json``, ``context --json`` and
   ``chunks --json`` and in every byte under the index's state dir and the registry. Canary words written beside the
   secrets must be found by the same checks (else the checks could not see a secret either).
3. False positives and speed. ``redact`` over real repositories' text files (default: the repositories under
   /work/data/shortq/repos, read in place, at most ``--max-mb-per-repo`` each): what it replaces, by kind, per MB,
   with examples (the replaced value masked), and its throughput; with ``--baseline CHECKOUT`` the same texts through
   another checkout's ``redact`` too, in turns, and the ratio of their times.

4. Worst cases (``--worst-cases``, alone). For every pattern's literal and every secret name, followed by each of a
   set of fillers, a crafted line (``literal+filler`` repeated, and one literal then the filler repeated) is redacted
   at each given length (default 10,000 and 100,000 characters): the slowest per pattern, in MB/s of CPU time. A
   pattern that backtracks shows as MB/s falling with the length.

With ``--detect-secrets-python`` (a Python that has the ``detect-secrets`` package; localidx does not depend on it)
the same recall, corpus and timing run through detect-secrets' default plugins and filters, side by side. Its
findings are per line: a generated secret counts as found when its line is reported (a key block's lines when its
file's private key is).

Prints figures only; everything it writes lives under /tmp (``LOCALIDX_BENCH_WORK``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from _corpus import WORK, git  # noqa: E402
from secret_shapes import make_repository_files  # noqa: E402

from localidx.safety.redact import redact, redact_env  # noqa: E402

TEXT_SUFFIXES = {".py", ".js", ".ts", ".tsx", ".jsx", ".go", ".rs", ".java", ".kt", ".rb", ".php", ".c", ".h", ".cc",
                 ".cpp", ".hpp", ".cs", ".swift", ".scala", ".ex", ".exs", ".hs", ".lua", ".zig", ".sh", ".bash",
                 ".zsh", ".yaml", ".yml", ".json", ".toml", ".ini", ".cfg", ".conf", ".md", ".rst", ".txt", ".xml",
                 ".html", ".css", ".env", ".properties", ".gradle", ".mk", ".cmake", ".dockerfile"}
DEFAULT_CORPUS = Path("/work/data/shortq/repos")

# Run by the Python given with --detect-secrets-python: reads [[label, path], ...] on stdin, prints one JSON object
# per finding and a last {"seconds": ...} line (scanning time only).
DETECT_SECRETS_SCRIPT = r"""
import json, sys, time
from detect_secrets import SecretsCollection
from detect_secrets.settings import default_settings
files = json.load(sys.stdin)
out = []
started = time.perf_counter()
with default_settings():
    for label, path in files:
        collection = SecretsCollection()
        collection.scan_file(path)
        for _name, found in collection:
            out.append({"label": label, "line": found.line_number, "type": found.type,
                        "value": found.secret_value or ""})
seconds = time.perf_counter() - started
for item in out:
    print(json.dumps(item))
print(json.dumps({"seconds": seconds}))
"""


def _redact_file(path: str, text: str) -> tuple[str, list]:
    return (redact_env if Path(path).name.startswith(".env") else redact)(text)


def _mask(value: str) -> str:
    return value[:3] + "…" + f"({len(value)} chars)" if len(value) > 6 else "…"


# -- 1. recall ------------------------------------------------------------------------------------------------------


def recall(files: dict[str, str], secrets) -> dict[str, list[int]]:
    """shape -> [caught, total] for localidx's redaction."""
    redacted = {path: _redact_file(path, text)[0] for path, text in files.items()}
    by_shape: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for secret in secrets:
        by_shape[secret.shape][1] += 1
        if not any(probe in redacted[secret.path] for probe in secret.probes):
            by_shape[secret.shape][0] += 1
    return by_shape


def detect_secrets_recall(python: str, files: dict[str, str], secrets, where: Path) -> dict[str, list[int]]:
    where.mkdir(parents=True, exist_ok=True)
    listing = []
    for path, text in files.items():
        target = where / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        listing.append([path, str(target)])
    findings, _seconds = _run_detect_secrets(python, listing)
    lines = {(f["label"], f["line"]) for f in findings}
    key_files = {f["label"] for f in findings if f["type"] == "Private Key"}
    by_shape: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for secret in secrets:
        by_shape[secret.shape][1] += 1
        numbers = [n for n, line in enumerate(files[secret.path].splitlines(), 1) if secret.probes[-1] in line]
        # A key block is reported once, on its first line: every line of the block counts as found then.
        if any((secret.path, n) in lines for n in numbers) or (secret.kind in ("pem", "ppk")
                                                                and secret.path in key_files):
            by_shape[secret.shape][0] += 1
    return by_shape


def _run_detect_secrets(python: str, listing: list[list[str]]) -> tuple[list[dict], float]:
    proc = subprocess.run([python, "-c", DETECT_SECRETS_SCRIPT], input=json.dumps(listing), capture_output=True,
                          text=True, timeout=7200)
    if proc.returncode != 0:
        raise SystemExit(f"detect-secrets failed: {proc.stderr.strip()[-500:]}")
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return rows[:-1], rows[-1]["seconds"]


# -- 2. stored and served --------------------------------------------------------------------------------------------


def index_and_look(files: dict[str, str], secrets, canaries: list[str]) -> dict:
    base = WORK / "redaction"
    shutil.rmtree(base, ignore_errors=True)
    root = base / "repo"
    root.mkdir(parents=True)
    git(root, "init", "-q")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "secrets")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCALIDX_")}
    env.update({"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(base / "state"), "LOCALIDX_WATCH": "0",
                "LOCALIDX_INCLUDE_SECRET_FILES": "1", "LOCALIDX_REGISTRY": str(base / "registry.json"),
                "LOCALIDX_CONFIG_DIR": str(base / "config")})

    def lx(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "localidx", *args], cwd=root, env=env, capture_output=True,
                              text=True, timeout=600)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"localidx {' '.join(args)} failed: {proc.stderr.strip()[-300:]}")
        return proc.stdout + proc.stderr

    started = time.perf_counter()
    lx("index")
    index_s = time.perf_counter() - started
    queries = ["password token key secret", "api key webhook", "Authorization Basic Bearer curl mysql",
               "AccountKey storage", "PuTTY Private-Lines", "RSA PRIVATE KEY", "connect retry notify", *canaries,
               *sorted({s.shape.replace("_", " ") for s in secrets})]
    served = [lx("search", q, "--json", "-k", "100") for q in queries]
    served += [lx("context", q, "--json") for q in queries[:8]]
    served.append(lx("chunks", "--json", *sorted(files)))
    answers = "\n".join(served)
    stored = b"".join(p.read_bytes() for p in sorted((base / "state").rglob("*")) if p.is_file())
    stored += (base / "registry.json").read_bytes() if (base / "registry.json").exists() else b""
    leaked_served = sorted({s.shape for s in secrets for p in s.probes if p in answers})
    leaked_stored = sorted({s.shape for s in secrets for p in s.probes if p.encode() in stored})
    return {"secrets": len(secrets), "queries": len(served), "served_bytes": len(answers),
            "stored_bytes": len(stored), "index_s": index_s,
            "served_leaks": leaked_served, "stored_leaks": leaked_stored,
            "canaries_served": sum(c in answers for c in canaries), "canaries_stored": sum(c.encode() in stored
                                                                                            for c in canaries),
            "canaries": len(canaries)}


# -- 3. false positives and speed ------------------------------------------------------------------------------------


def corpus_files(roots: list[Path], max_bytes_per_repo: int) -> list[tuple[str, Path]]:
    out = []
    for top in roots:
        repos = sorted(p for p in top.iterdir() if p.is_dir()) if (top / ".git").exists() is False else [top]
        for repo in repos:
            taken = 0
            for path in sorted(repo.rglob("*")):
                if ".git" in path.parts or not path.is_file() or path.is_symlink():
                    continue
                if path.suffix.lower() not in TEXT_SUFFIXES and path.name not in ("Dockerfile", "Makefile"):
                    continue
                size = path.stat().st_size
                if size > 1024 * 1024 or taken + size > max_bytes_per_repo:
                    continue
                taken += size
                out.append((f"{repo.name}/{path.relative_to(repo).as_posix()}", path))
    return out


def false_positives(files: list[tuple[str, Path]]) -> dict:
    texts = []
    for label, path in files:
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        texts.append((label, data.decode("utf-8", errors="replace"), len(data)))
    started = time.perf_counter()
    results = [(label, _redact_file(label, text)) for label, text, _n in texts]
    seconds = time.perf_counter() - started
    kinds: Counter = Counter()
    files_hit = 0
    examples: dict[str, list[str]] = defaultdict(list)
    for (label, (out, found)), (_l, text, _n) in zip(results, texts):
        if not found:
            continue
        files_hit += 1
        lines = text.splitlines()
        for item in found:
            kinds[item.kind] += 1
            if len(examples[item.kind]) < 3:
                line = lines[item.line - 1] if item.line - 1 < len(lines) else ""
                red = out.splitlines()[item.line - 1] if item.line - 1 < len(out.splitlines()) else ""
                examples[item.kind].append(f"{label}:{item.line}: {red.strip()[:110]}  [was {_mask(_gone(line, red))}]")
    total = sum(n for _l, _t, n in texts)
    return {"files": len(texts), "mb": total / 1e6, "seconds": seconds, "kinds": kinds, "files_hit": files_hit,
            "examples": examples}


def _gone(before: str, after: str) -> str:
    """The text the redaction replaced on a line (for a masked example)."""
    start = 0
    while start < min(len(before), len(after)) and before[start] == after[start]:
        start += 1
    end = 0
    while end < min(len(before), len(after)) - start and before[-1 - end] == after[-1 - end]:
        end += 1
    return before[start:len(before) - end]


def detect_secrets_corpus(python: str, files: list[tuple[str, Path]]) -> dict:
    listing = [[label, str(path)] for label, path in files]
    findings, seconds = _run_detect_secrets(python, listing)
    total = sum(path.stat().st_size for _l, path in files)
    kinds = Counter(f["type"] for f in findings)
    examples: dict[str, list[str]] = defaultdict(list)
    for f in findings:
        if len(examples[f["type"]]) < 3:
            examples[f["type"]].append(f"{f['label']}:{f['line']}  [{_mask(f['value'])}]")
    return {"files": len(files), "mb": total / 1e6, "seconds": seconds, "kinds": kinds,
            "files_hit": len({f["label"] for f in findings}), "examples": examples}


def compare_speed(files: list[tuple[str, Path]], baseline: Path, rounds: int = 4) -> tuple[float, float, float]:
    """(MB, this checkout's MB/s, the baseline checkout's MB/s): ``redact`` of both over the same texts, in turns,
    best of ``rounds`` in CPU time (turns and CPU time keep the machine's other load out of the ratio)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("baseline_redact", baseline / "localidx" / "redact.py")
    other = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = other
    spec.loader.exec_module(other)
    texts = []
    for label, path in files:
        data = path.read_bytes()
        if b"\0" not in data[:8192]:
            texts.append((label, data.decode("utf-8", errors="replace")))
    from localidx.safety import redact as ours

    best = {"ours": float("inf"), "baseline": float("inf")}
    for _ in range(rounds):
        for name, module in (("ours", ours), ("baseline", other)):
            started = time.process_time()
            for label, text in texts:
                (module.redact_env if Path(label).name.startswith(".env") else module.redact)(text)
            best[name] = min(best[name], time.process_time() - started)
    mb = sum(len(text.encode()) for _l, text in texts) / 1e6
    return mb, mb / best["ours"], mb / best["baseline"]


# -- 4. worst cases ---------------------------------------------------------------------------------------------------

# What follows a pattern's literal in a crafted line: each makes some regex run far before it can fail.
FILLERS = ("", " ", "a", "A1", "0", "_", "-", ":", "=", ".", "/", "+", "@", "\"", "'", "`", "\t", "://a:", " -p",
           " -u a:", ":a@", "a=", "\\n", "{", "}", "<", "(", "&", ";", " = \"", ": ", "=\"", " #")


def _cased_literals(pattern) -> list[str]:
    """A pattern's hints as its regex writes them (``AIza``, ``eyJ``), and in lower and upper case."""
    source = pattern.regex.pattern.replace("\\", "")
    out = []
    for hint in pattern.hints:
        at = source.lower().find(hint)
        out += [source[at:at + len(hint)]] if at >= 0 else []
        out += [hint, hint.upper()]
    return list(dict.fromkeys(out))


def _repeated(unit: str, size: int) -> str:
    return (unit * (size // max(1, len(unit)) + 1))[:size]


def worst_case_lines() -> list[tuple[str, str, object, object]]:
    """(what, line shape, redact function, size -> line) for every pattern's literal and every secret name followed
    by every filler: ``literal+filler`` repeated, and one literal then the filler repeated; ``redact_env`` too."""
    from localidx.safety import redact as r
    from localidx.safety import secret_scan

    cases: list[tuple[str, str, object, object]] = []

    def add(what, literal, filler, func, env=False):
        glue = "=" if env else ""
        cases.append((what, f"({literal!r}+{filler!r})*", func,
                      lambda n, u=literal + glue + filler: _repeated(u, n)))
        if filler:
            cases.append((what, f"{literal!r}{'+=' if env else ''}+{filler!r}*", func,
                          lambda n, h=literal + glue, f=filler: (h + _repeated(f, n))[:n]))

    for pattern in secret_scan._PATTERNS:
        for literal in _cased_literals(pattern):
            for filler in FILLERS:
                add(pattern.kind, literal, filler, r.redact)
    for keyword in sorted({name.replace("?", "_") for name, _kind in secret_scan._SECRET_NAMES}):
        for literal in (keyword, keyword.upper(), "x_" + keyword):
            for filler in FILLERS:
                add(f"name {keyword}", literal, filler, r.redact)
                add(f".env {keyword}", literal, filler, r.redact_env, env=True)
    return cases


def _mbps(func, line: str, runs: int = 1) -> float:
    """MB/s of CPU time (other processes on the machine do not count), the best of ``runs``. The collector is off
    while timing: a full collection walks this process's tens of thousands of crafted cases, which is the
    benchmark's own heap, not redaction's work (it made random cases look ten times slower)."""
    import gc

    best = float("inf")
    for _ in range(runs):
        gc.disable()
        try:
            started = time.process_time()
            func(line)
            best = min(best, time.process_time() - started)
        finally:
            gc.enable()
    return len(line.encode()) / 1e6 / max(best, 1e-6)


def print_worst_cases(sizes: list[int]) -> None:
    """Every case at the smallest size; the three slowest of each pattern again at each size, best of three (a regex
    that backtracks shows there: its MB/s falls as the line grows)."""
    cases = worst_case_lines()
    by_what: dict[str, list] = defaultdict(list)
    for what, shape, func, make in cases:
        by_what[what].append((_mbps(func, make(sizes[0])), shape, func, make))
    print(f"worst cases: {len(cases)} crafted lines; per pattern or name the slowest, in MB/s at "
          f"{' / '.join(f'{s:,}' for s in sizes)} characters:")
    slowest = []
    for what, rows in sorted(by_what.items()):
        rows.sort(key=lambda row: row[0])
        worst = None
        for mbps, shape, func, make in rows[:3]:
            figures = [_mbps(func, make(size), runs=3) for size in sizes]
            if worst is None or min(figures) < min(worst[0]):
                worst = (figures, shape)
        slowest.append((min(worst[0]), what, worst))
    for low, what, (figures, shape) in sorted(slowest, key=lambda x: x[0])[:25]:
        print(f"  {' '.join(f'{f:8.1f}' for f in figures)}  {what:<24} {shape}")
    print(f"  ... {len(slowest)} patterns and names; slowest of all: {min(s[0] for s in slowest):.1f} MB/s")


# -- report ---------------------------------------------------------------------------------------------------------


def _print_recall(name: str, by_shape: dict[str, list[int]]) -> None:
    caught = sum(c for c, _t in by_shape.values())
    total = sum(t for _c, t in by_shape.values())
    print(f"  {name}: {caught}/{total} caught ({caught / total:.1%})")
    missed = {shape: (c, t) for shape, (c, t) in sorted(by_shape.items()) if c < t}
    for shape, (c, t) in missed.items():
        print(f"    {shape:<22} {c}/{t}")


def _print_fp(name: str, fp: dict) -> None:
    total = sum(fp["kinds"].values())
    print(f"  {name}: {total} replaced in {fp['files_hit']} of {fp['files']} files ({fp['mb']:.1f} MB): "
          f"{total / fp['mb']:.2f} per MB; {fp['mb'] / fp['seconds']:.1f} MB/s ({fp['seconds']:.2f} s)")
    for kind, n in fp["kinds"].most_common():
        print(f"    {kind:<26} {n}")
        for example in fp["examples"][kind]:
            print(f"        {example}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, nargs="*", default=[DEFAULT_CORPUS])
    parser.add_argument("--max-mb-per-repo", type=float, default=4.0)
    parser.add_argument("--per-place", type=int, default=3, help="secrets per place and shape (3: about 270)")
    parser.add_argument("--detect-secrets-python", default=None)
    parser.add_argument("--skip-index", action="store_true")
    parser.add_argument("--baseline", type=Path, default=None, metavar="CHECKOUT",
                        help="also time another checkout's redact over the same real code, in turns (the cost ratio)")
    parser.add_argument("--worst-cases", type=int, nargs="*", default=None, metavar="CHARS",
                        help="only the crafted worst-case lines, at these line lengths (default 10000 100000)")
    args = parser.parse_args()
    if args.worst_cases is not None:
        print_worst_cases(sorted(args.worst_cases or [10_000, 100_000]))
        return

    files, secrets, canaries = make_repository_files(seed=20240611, per_place=args.per_place)
    shapes = sorted({s.shape for s in secrets})
    kinds = sorted({s.kind for s in secrets})
    print(f"generated: {len(secrets)} secrets, {len(shapes)} shapes, {len(kinds)} kinds of file ({', '.join(kinds)}), "
          f"{len(files)} files")
    print("recall (a secret is caught when no probe of it is left in the redacted text):")
    _print_recall("localidx.safety.redact", recall(files, secrets))
    if args.detect_secrets_python:
        _print_recall("detect-secrets (line reported)",
                      detect_secrets_recall(args.detect_secrets_python, files, secrets, WORK / "redaction-ds"))

    if not args.skip_index:
        found = index_and_look(files, secrets, canaries)
        print(f"indexed by the CLI in {found['index_s']:.1f} s; {found['queries']} answers ({found['served_bytes']:,} "
              f"bytes) and {found['stored_bytes']:,} bytes on disk searched for {found['secrets']} secrets:")
        print(f"  served: {len(found['served_leaks'])} shapes leaked {found['served_leaks']}")
        print(f"  stored: {len(found['stored_leaks'])} shapes leaked {found['stored_leaks']}")
        print(f"  control: canaries served {found['canaries_served']}/{found['canaries']}, "
              f"stored {found['canaries_stored']}/{found['canaries']}")

    corpus = corpus_files(args.corpus, int(args.max_mb_per_repo * 1e6))
    print(f"real code: {len(corpus)} text files from {', '.join(str(c) for c in args.corpus)} "
          f"(at most {args.max_mb_per_repo:g} MB per repository)")
    _print_fp("localidx.safety.redact", false_positives(corpus))
    if args.baseline:
        mb, ours, theirs = compare_speed(corpus, args.baseline)
        print(f"  against {args.baseline}: {ours:.1f} MB/s here, {theirs:.1f} MB/s there over {mb:.1f} MB "
              f"(best of 4 in turns, CPU time): {theirs / ours:.2f}x the time")
    if args.detect_secrets_python:
        _print_fp("detect-secrets", detect_secrets_corpus(args.detect_secrets_python, corpus))


if __name__ == "__main__":
    main()
