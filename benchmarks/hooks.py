"""Benchmark: what localidx's git hooks cost the git commands that fire them, and how many index passes they cause.

A repository of real code (copies of standard-library packages, about 300 files) is built under /tmp and indexed
once. Then, with the hooks installed:

(a) 20 commits, each editing one file, timed as ``git commit`` wall time, in three interleaved variants so drift
    hits all alike: no hooks (``-c core.hooksPath=<empty dir>``), the floor any hook costs (four hooks that only
    ``exit 0``), and localidx's hooks. Printed: the medians, the median added time, and the hook script's own time
    (run directly, 20 times).
(b) a rebase of a 100-commit branch onto a main that moved by one commit, timed in the same three variants
    (interleaved runs, the branch reset between runs), and the index passes each rebase with localidx's hooks caused,
    counted in hooks.log once the background work is done.

    .venv/bin/python benchmarks/hooks.py [--real-model] [--rebase-runs 5] [--work /tmp/localidx-bench/hooks]

Goals: (a) under 50 ms added per commit; (b) at most one pass per rebase and at most 10% slower. The fake embedder is
the default (the passes run in the background either way; ``--real-model`` makes them heavier). Not a timed test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from localidx.interface import githooks  # noqa: E402
from localidx.paths import index_paths  # noqa: E402

PACKAGES = ("json", "email", "http", "logging", "concurrent", "importlib", "urllib", "xml", "asyncio", "encodings")
IDENTITY = ["-c", "user.name=bench", "-c", "user.email=bench@localidx.invalid", "-c", "init.defaultBranch=main",
            "-c", "commit.gpgsign=false"]


def git(cwd: Path, env: dict, *args: str) -> float:
    """Run git; returns its wall time in seconds."""
    started = time.perf_counter()
    subprocess.run(["git", *IDENTITY, *args], cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def localidx(cwd: Path, env: dict, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "localidx", *args], cwd=cwd, env=env, check=True,
                   stdout=subprocess.DEVNULL)


def build_repo(work: Path, env: dict) -> Path:
    repo = work / "repo"
    if work.exists():
        shutil.rmtree(work)
    repo.mkdir(parents=True)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for package in PACKAGES:
        shutil.copytree(stdlib / package, repo / package, ignore=shutil.ignore_patterns("__pycache__", "test*"))
    git(repo, env, "init", "-q")
    git(repo, env, "add", "-A")
    git(repo, env, "commit", "-q", "-m", "initial")
    return repo


def wait_idle(repo: Path, timeout: float = 600.0) -> float:
    started = time.perf_counter()
    while not githooks.is_idle(repo):
        if time.perf_counter() - started > timeout:
            raise SystemExit("the hooks' background work did not finish")
        time.sleep(0.02)
    return time.perf_counter() - started


def passes(repo: Path, home: str) -> int:
    log = index_paths(repo, True, home).worktree / "hooks.log"
    return log.read_text().count("index pass:") if log.exists() else 0


def edit(repo: Path, rel: str, n: int) -> None:
    with open(repo / rel, "a", encoding="utf-8") as fh:
        fh.write(f"\n\ndef _bench_{n}():\n    return {n}\n")


def bench_commits(repo: Path, env: dict, variants: dict[str, list[str]], files: list[str], home: str) -> None:
    times: dict[str, list[float]] = {name: [] for name in variants}
    catch_up: list[float] = []
    before = passes(repo, home)
    n = 0
    for i in range(20):
        for name, flags in variants.items():
            edit(repo, files[n], n)
            n += 1
            git(repo, env, "add", "-A")
            times[name].append(git(repo, env, *flags, "commit", "-q", "-m", f"{name} {i}"))
            catch_up.append(wait_idle(repo))  # untimed: a commit seconds after the last, as people commit
    hooked_passes = passes(repo, home) - before
    hook = repo / ".git" / "hooks" / "post-commit"
    script = []
    for _ in range(20):
        started = time.perf_counter()
        # Through a shell that outlives the hook, as git does (the background run waits for its parent).
        subprocess.run(["sh", "-c", '"$0"; true', str(hook)], cwd=repo, env=env, check=True)
        script.append(time.perf_counter() - started)
        wait_idle(repo)
    ms = 1000
    print("(a) git commit, 20 commits per variant (interleaved, each after the last one's index pass)")
    for name, values in times.items():
        print(f"    {name:<16} median {statistics.median(values) * ms:6.1f} ms   min {min(values) * ms:6.1f} ms"
              f"   max {max(values) * ms:6.1f} ms")
    base = statistics.median(times["no hooks"])
    print(f"    added by localidx's hooks: median {(statistics.median(times['localidx hooks']) - base) * ms:+.1f} ms "
          f"(goal < 50 ms); by empty hooks: {(statistics.median(times['empty hooks']) - base) * ms:+.1f} ms")
    print(f"    post-commit script alone: median {statistics.median(script) * ms:.1f} ms, min {min(script) * ms:.1f}"
          f" ms, max {max(script) * ms:.1f} ms")
    print(f"    index passes for the 20 hooked commits: {hooked_passes}; median time from a hooked commit to its "
          f"pass' end {statistics.median(catch_up[2::3]):.2f} s (in the background)")


def bench_rebase(repo: Path, env: dict, variants: dict[str, list[str]], files: list[str], home: str,
                 runs: int) -> None:
    quiet = dict(env, LOCALIDX="0")
    git(repo, quiet, "checkout", "-q", "-b", "feature-base")
    for i in range(100):
        edit(repo, files[i], 1000 + i)
        git(repo, quiet, "add", "-A")
        git(repo, quiet, "commit", "-q", "-m", f"feature {i}")
    git(repo, quiet, "checkout", "-q", "main")
    edit(repo, files[-1], 9999)
    git(repo, quiet, "add", "-A")
    git(repo, quiet, "commit", "-q", "-m", "main moves")
    wait_idle(repo)
    times: dict[str, list[float]] = {name: [] for name in variants}
    pass_counts = []
    for _ in range(runs):
        for name, flags in variants.items():
            git(repo, quiet, *variants["no hooks"], "checkout", "-q", "-B", "feature", "feature-base")
            wait_idle(repo)
            before = passes(repo, home)
            times[name].append(git(repo, env, *flags, "rebase", "-q", "main"))
            wait_idle(repo)
            if name == "localidx hooks":
                pass_counts.append(passes(repo, home) - before)
    base = statistics.median(times["no hooks"])
    print(f"(b) git rebase of 100 commits, {runs} runs per variant (interleaved)")
    for name, values in times.items():
        print(f"    {name:<16} median {statistics.median(values):.3f} s ({statistics.median(values) / base - 1:+.1%})"
              f"   min {min(values):.3f} s ({min(values) / min(times['no hooks']) - 1:+.1%})"
              f"   runs {', '.join(f'{t:.3f}' for t in values)}")
    print("    goal: localidx's hooks <= +10%")
    print(f"    index passes per rebase with localidx's hooks: {pass_counts}   (goal: at most 1)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/localidx-bench/hooks"))
    parser.add_argument("--real-model", action="store_true", help="Index with the default model, not the fake one.")
    parser.add_argument("--rebase-runs", type=int, default=5)
    args = parser.parse_args()

    home = str(args.work / "state")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k != "LOCALIDX"}
    env.update(HOME=str(args.work / "home"), GIT_CONFIG_NOSYSTEM="1", LOCALIDX_HOME=home, HF_HUB_OFFLINE="1")
    if not args.real_model:
        env["LOCALIDX_EMBED_MODEL"] = "fake"
    os.environ["LOCALIDX_HOME"] = home
    repo = build_repo(args.work, env)
    (args.work / "home").mkdir()
    no_hooks_dir = args.work / "no-hooks"
    no_hooks_dir.mkdir()
    exit_0_dir = args.work / "exit-0-hooks"
    exit_0_dir.mkdir()
    for hook_type in githooks.HOOK_TYPES:
        (exit_0_dir / hook_type).write_text("#!/bin/sh\nexit 0\n")
        (exit_0_dir / hook_type).chmod(0o755)
    variants = {"no hooks": ["-c", f"core.hooksPath={no_hooks_dir}"],
                "empty hooks": ["-c", f"core.hooksPath={exit_0_dir}"], "localidx hooks": []}
    files = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*.py"))
    started = time.perf_counter()
    localidx(repo, env, "index", "-q")
    print(f"repository: {len(files)} Python files; first index {time.perf_counter() - started:.1f} s; "
          f"model: {'default' if args.real_model else 'fake'}; cores: {os.cpu_count()}; "
          f"load average: {os.getloadavg()[0]:.1f}")
    localidx(repo, env, "hooks", "install")
    bench_commits(repo, env, variants, files, home)
    bench_rebase(repo, env, variants, files, home, args.rebase_runs)


if __name__ == "__main__":
    main()
