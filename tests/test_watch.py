"""The watcher on real files, real git and real inotify: what a user's edits, checkouts and commits produce."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from localidx.config import Settings
from localidx.discover import watch
from localidx.discover.watch import Watcher
from conftest import git, init_repo as make_repo, write_files as write

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/sys/fs/inotify"), reason="needs Linux inotify")

DEBOUNCE = 0.3
QUIET = 1.2  # long enough for any batch a change would cause: debounce plus watchdog's 0.5 s move pairing


@pytest.fixture(autouse=True)
def no_user_git_config(isolated_git_config):
    return isolated_git_config


BASIC = {
    ".gitignore": "build/\n*.log\nnode_modules/\n",
    "README.md": "# demo\n",
    "src/app.py": "def main():\n    return 1\n",
    "src/pkg/mod.py": "X = 1\n",
    "src/pkg/util.py": "Y = 2\n",
    "lib/helpers.py": "def h():\n    pass\n",
}


class Batches:
    """What on_change received, with waits that end as soon as the expected batch is there."""

    def __init__(self) -> None:
        self.batches: list[set[str]] = []
        self._cond = threading.Condition()
        self.threads: set[str] = set()

    def __call__(self, paths: set[str]) -> None:
        with self._cond:
            self.batches.append(set(paths))
            self.threads.add(threading.current_thread().name)
            self._cond.notify_all()

    @property
    def union(self) -> set[str]:
        with self._cond:
            return set().union(*self.batches)

    def wait_for(self, predicate, timeout: float = 10.0) -> list[set[str]]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out; batches so far: {self.batches}")
                self._cond.wait(left)
            return list(self.batches)

    def wait_paths(self, paths: set[str], timeout: float = 10.0) -> list[set[str]]:
        try:
            return self.wait_for(lambda b: paths <= b.union, timeout)
        except AssertionError:
            raise AssertionError(f"never reported: {sorted(paths - self.union)[:20]}") from None

    def settle(self, quiet: float = QUIET) -> list[set[str]]:
        """Wait until no batch has arrived for ``quiet`` seconds; the batches."""
        while True:
            count = len(self.batches)
            time.sleep(quiet)
            if len(self.batches) == count:
                return list(self.batches)


@pytest.fixture
def start_watcher():
    """Start a Watcher on a root; every one is stopped after the test."""
    started: list[Watcher] = []

    def start(root: Path, debounce_s: float = DEBOUNCE, settings: Settings | None = None, **kwargs):
        batches = Batches()
        watcher = Watcher(root, settings or Settings(), batches, debounce_s=debounce_s, **kwargs)
        started.append(watcher)
        watcher.start()
        return watcher, batches

    yield start
    for watcher in started:
        watcher.stop()


def test_atomic_save_reports_exactly_the_target_once(tmp_path, start_watcher):
    root = make_repo(tmp_path / "r", BASIC)
    watcher, got = start_watcher(root)
    assert watcher.mode == "inotify"
    tmp = root / "src" / ".app.py.tmp-1234"
    tmp.write_text("def main():\n    return 2\n")
    os.replace(tmp, root / "src" / "app.py")
    assert got.settle() == [{"src/app.py"}]
    assert got.threads == {"localidx-watch"}


def test_vim_style_save_reports_the_target_in_one_batch(tmp_path, start_watcher):
    root = make_repo(tmp_path / "r", BASIC)
    watcher, got = start_watcher(root)
    target = root / "src" / "app.py"
    backup = root / "src" / "app.py~"
    os.rename(target, backup)
    target.write_text("def main():\n    return 3\n")
    backup.unlink()
    batches = got.settle()
    assert len(batches) == 1
    assert "src/app.py" in batches[0] and batches[0] <= {"src/app.py", "src/app.py~"}


def test_in_place_save(tmp_path, start_watcher):
    root = make_repo(tmp_path / "r", BASIC)
    watcher, got = start_watcher(root)
    with open(root / "lib" / "helpers.py", "r+", encoding="utf-8") as fh:
        fh.seek(0, os.SEEK_END)
        fh.write("\n# more\n")
        fh.flush()
        fh.write("# and more\n")
    (root / "README.md").write_text("# changed\n")  # a top-level file: the root's own watch
    assert got.settle() == [{"lib/helpers.py", "README.md"}]


def test_checkout_of_300_files_comes_as_one_or_few_batches(tmp_path, start_watcher):
    root = make_repo(tmp_path / "r", BASIC)
    git(root, "checkout", "-q", "-b", "big")
    many = {f"gen/m{i // 50}/f{i}.py": f"V = {i}\n" for i in range(300)}
    write(root, many)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "300 files")
    git(root, "checkout", "-q", "main")
    assert not (root / "gen").exists()
    watcher, got = start_watcher(root)
    git(root, "checkout", "-q", "big")
    batches = got.wait_paths(set(many))
    batches = got.settle()
    assert len(batches) <= 3, [len(b) for b in batches]
    assert got.union == set(many)
    git(root, "checkout", "-q", "main")  # and back: deleted again
    got.wait_for(lambda b: len(b.batches) > len(batches) and "gen" in set().union(*b.batches[len(batches):]))


@pytest.mark.parametrize("layout", ["split", "root-recursive"])
def test_ignored_paths_and_git_internals_produce_no_batch(tmp_path, start_watcher, monkeypatch, layout):
    if layout == "root-recursive":
        monkeypatch.setattr(watch, "MAX_SCHEDULES", 0)  # one recursive watch on the root: .git/ events arrive
    root = make_repo(tmp_path / "r", {**BASIC, ".localidxignore": "src/pkg/util.py\n"}, {"build/keep": "x"})
    (root / "notes.txt").write_text("to be committed\n")
    watcher, got = start_watcher(root)
    if layout == "split":
        assert watcher.watch_count == 4  # the root, src, src/pkg, lib: not build/ nor .git/
    write(root, {
        "build/out.o": "obj",
        "build/deep/er.o": "obj",
        "debug.log": "log",
        "src/node_modules/dep/index.js": "module.exports = 1\n",
        "src/pkg/util.py": "Y = 3\n",  # tracked but .localidxignore'd
    })
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a real commit")
    git(root, "status", "--short")
    assert got.settle() == []


def test_writes_to_a_state_dir_inside_the_tree_produce_no_batch(tmp_path, start_watcher):
    root = make_repo(tmp_path / "r", BASIC)
    (root / ".lxstate").mkdir()  # LOCALIDX_HOME=.lxstate: untracked, not ignored
    watcher, got = start_watcher(root, settings=Settings(home=str(root / ".lxstate")))
    write(root, {".lxstate/lancedb/t.lance/data/0.lance": "rows", ".lxstate/daemon.log": "line\n"})
    assert got.settle() == []
    (root / "src" / "app.py").write_text("def main():\n    return 9\n")
    assert got.settle() == [{"src/app.py"}]


def test_new_file_in_new_nested_directories(tmp_path, start_watcher):
    root = make_repo(tmp_path / "r", BASIC)
    watcher, got = start_watcher(root)
    os.makedirs(root / "a" / "b")  # a new top-level directory
    (root / "a" / "b" / "f.py").write_text("F = 1\n")
    os.makedirs(root / "src" / "x" / "y")  # new directories inside a watched one
    (root / "src" / "x" / "y" / "g.py").write_text("G = 1\n")
    got.wait_paths({"a/b/f.py", "src/x/y/g.py"})
    (root / "a" / "b" / "h.py").write_text("H = 1\n")  # the new top-level directory is now watched
    got.wait_paths({"a/b/h.py"})
    assert got.union == {"a/b/f.py", "src/x/y/g.py", "a/b/h.py"}


def test_moves_report_both_sides_and_deleted_directories(tmp_path, start_watcher):
    root = make_repo(tmp_path / "r", BASIC)
    watcher, got = start_watcher(root)
    os.rename(root / "src" / "app.py", root / "src" / "main.py")
    assert got.settle() == [{"src/app.py", "src/main.py"}]

    os.rename(root / "lib", root / "lib2")  # a top-level directory: re-watched under its new name
    got.wait_paths({"lib", "lib2/helpers.py"})
    (root / "lib2" / "more.py").write_text("M = 1\n")
    got.wait_paths({"lib2/more.py"})

    shutil.move(str(root / "src" / "pkg"), str(tmp_path / "away"))  # out of the tree: no file events
    got.wait_paths({"src/pkg"})
    assert not {p for p in got.union if p.startswith("lib/") or p == "lib2"}


def test_a_top_level_directory_deleted_and_recreated_is_watched_again(tmp_path, start_watcher):
    root = make_repo(tmp_path / "r", BASIC)
    watcher, got = start_watcher(root)
    for round in range(3):
        shutil.rmtree(root / "lib")
        (root / "lib").mkdir()
        (root / "lib" / f"new{round}.py").write_text("N = 1\n")
    got.wait_paths({"lib", "lib/new2.py"})
    got.settle()
    (root / "lib" / "later.py").write_text("L = 1\n")
    got.wait_paths({"lib/later.py"})
    assert watcher.watch_count == 4


def test_gitignore_change_rescans_and_rewatches(tmp_path, start_watcher):
    root = make_repo(tmp_path / "r", BASIC, {"build/gen.py": "G = 1\n"})
    watcher, got = start_watcher(root)
    assert watcher.watch_count == 4  # the root, src, src/pkg, lib
    (root / ".gitignore").write_text("*.log\n")  # build/ is no longer ignored
    # The root's entries stand for everything: the indexer re-lists build/ and finds gen.py.
    got.wait_paths({".gitignore", "build", "src", "lib", "README.md"})
    (root / "build" / "new.py").write_text("N = 1\n")
    got.wait_paths({"build/new.py"})
    assert watcher.watch_count == 5

    (root / "src" / ".gitignore").write_text("pkg/\n")  # a nested .gitignore: its directory is re-examined
    got.wait_paths({"src/.gitignore", "src"})
    before = len(got.batches)
    (root / "src" / "pkg" / "new.py").write_text("P = 1\n")
    got.settle()
    assert len(got.batches) == before

    (root / ".localidxignore").write_text("lib/\n")  # lib/ leaves the index: asked as a rescan, then unwatched
    got.wait_for(lambda b: len(b.batches) > before and {".localidxignore", "lib"} <= b.batches[-1])
    assert watcher.watch_count == 4
    before = len(got.batches)
    (root / "lib" / "helpers.py").write_text("not indexed\n")
    assert len(got.settle()) == before


def test_plain_directory_outside_git(tmp_path, start_watcher):
    root = tmp_path / "plain"
    write(root, {".gitignore": "out/\n", "a.py": "A = 1\n", "pkg/b.py": "B = 1\n", "out/c.py": "C = 1\n"})
    watcher, got = start_watcher(root)
    assert watcher.mode == "inotify" and watcher.watch_count == 2  # the root and pkg/
    (root / "pkg" / "b.py").write_text("B = 2\n")
    (root / "out" / "c.py").write_text("C = 2\n")
    assert got.settle() == [{"pkg/b.py"}]


def test_ten_thousand_directories_start_and_report_a_deep_change(tmp_path, start_watcher):
    root = make_repo(tmp_path / "r", BASIC)
    tree = root / "tree"
    for i in range(100):
        for j in range(100):
            os.makedirs(tree / f"d{i}" / f"e{j}")
    began = time.perf_counter()
    watcher, got = start_watcher(root)
    took = time.perf_counter() - began
    print(f"10,100 untracked directories: started in {took:.2f} s with {watcher.watch_count} watches")
    assert watcher.mode == "inotify"
    assert watcher.watch_count >= 10_100
    (tree / "d57" / "e42" / "deep.py").write_text("D = 1\n")
    os.makedirs(tree / "d99" / "e99" / "f" / "g")
    (tree / "d99" / "e99" / "f" / "g" / "deeper.py").write_text("D = 2\n")
    assert got.wait_paths({"tree/d57/e42/deep.py", "tree/d99/e99/f/g/deeper.py"})


def test_polling_fallback_when_the_watch_limit_is_reached(tmp_path, start_watcher, caplog):
    root = make_repo(tmp_path / "r", BASIC)
    caplog.set_level(logging.WARNING, logger="localidx.discover.watch")
    # One watch short of the four needed; watchdog swallows a refusal below a watch's top, the watcher must not.
    watcher, got = start_watcher(root, watch_limit=3, poll_interval_s=0.2)
    assert watcher.mode == "polling"
    assert watcher.watch_count == 0
    assert any(r.levelno == logging.WARNING and "inotify watch limit reached" in r.getMessage() for r in caplog.records)
    time.sleep(0.05)  # a new mtime even on coarse clocks
    (root / "src" / "pkg" / "mod.py").write_text("X = 2\n")
    (root / "new.py").write_text("N = 1\n")
    (root / "debug.log").write_text("ignored\n")
    got.wait_paths({"src/pkg/mod.py", "new.py"})
    (root / "src" / "app.py").unlink()
    got.wait_paths({"src/app.py"})
    assert "debug.log" not in got.union


def test_polling_fallback_when_even_the_root_cannot_be_watched(tmp_path, start_watcher, caplog):
    root = make_repo(tmp_path / "r", BASIC)
    caplog.set_level(logging.WARNING, logger="localidx.discover.watch")
    watcher, got = start_watcher(root, watch_limit=0, poll_interval_s=0.2)
    assert watcher.mode == "polling"
    assert any(r.levelno == logging.WARNING for r in caplog.records)
    (root / "lib" / "helpers.py").write_text("changed\n")
    got.wait_paths({"lib/helpers.py"})


def test_polling_fallback_when_inotify_instances_run_out(tmp_path, start_watcher, monkeypatch, caplog):
    def refuse(watch_limit):
        raise OSError(errno.EMFILE, "inotify instance limit reached")

    monkeypatch.setattr(watch, "_new_observer", refuse)
    root = make_repo(tmp_path / "r", BASIC)
    caplog.set_level(logging.WARNING, logger="localidx.discover.watch")
    watcher, got = start_watcher(root, poll_interval_s=0.2)
    assert watcher.mode == "polling"
    assert any("instance limit" in r.getMessage() for r in caplog.records)
    (root / "README.md").write_text("changed\n")
    got.wait_paths({"README.md"})


def test_watch_limit_reached_later_switches_to_polling(tmp_path, start_watcher, caplog):
    root = make_repo(tmp_path / "r", BASIC)
    caplog.set_level(logging.WARNING, logger="localidx.discover.watch")
    # Exactly the watches the start needs (root, src, src/pkg, lib): the next directory is refused.
    watcher, got = start_watcher(root, watch_limit=4, poll_interval_s=0.2)
    assert watcher.mode == "inotify" and watcher.watch_count == 4
    os.makedirs(root / "src" / "sub")
    (root / "src" / "sub" / "s.py").write_text("S = 1\n")
    got.wait_for(lambda b: watcher.mode == "polling" and "src" in b.union)
    assert any("inotify watch limit reached" in r.getMessage() for r in caplog.records)
    time.sleep(0.05)
    (root / "src" / "sub" / "s.py").write_text("S = 2\n")
    got.wait_for(lambda b: "src/sub/s.py" in b.batches[-1])


def test_lost_events_ask_for_a_rescan_and_repeated_losses_poll(tmp_path, start_watcher, caplog):
    root = make_repo(tmp_path / "r", BASIC)
    caplog.set_level(logging.WARNING, logger="localidx.discover.watch")
    watcher, got = start_watcher(root, poll_interval_s=0.2)
    everything = {".gitignore", "README.md", "src", "lib"}
    watcher._fd.overflowed = True  # what the kernel's IN_Q_OVERFLOW sets; faked, the real one needs a flood
    got.wait_paths(everything)
    assert watcher.mode == "inotify"
    for _ in range(watch.OVERFLOW_LIMIT - 1):
        count = len(got.batches)
        watcher._fd.overflowed = True
        got.wait_for(lambda b: len(b.batches) > count)
    assert watcher.mode == "polling"
    assert any("keeps overflowing" in r.getMessage() for r in caplog.records)
    time.sleep(0.05)
    (root / "README.md").write_text("still reported\n")
    got.wait_for(lambda b: "README.md" in b.batches[-1] and len(b.batches[-1]) == 1)


def test_a_failure_in_the_watcher_falls_back_to_polling(tmp_path, start_watcher, monkeypatch, caplog):
    root = make_repo(tmp_path / "r", BASIC)
    watcher, got = start_watcher(root, poll_interval_s=0.2)

    def broken(*args):
        raise ValueError("a bug")

    monkeypatch.setattr(watcher, "_handle", broken)
    (root / "README.md").write_text("one\n")
    got.wait_for(lambda b: watcher.mode == "polling" and "README.md" in b.union)
    assert any(r.levelno == logging.ERROR and "failed" in r.getMessage() for r in caplog.records)
    time.sleep(0.05)
    (root / "lib" / "helpers.py").write_text("two\n")
    got.wait_paths({"lib/helpers.py"})


def test_a_constant_trickle_still_flushes(tmp_path, start_watcher):
    root = make_repo(tmp_path / "r", BASIC)
    watcher, got = start_watcher(root, debounce_s=0.1)  # flushed at the latest 1 s after the first event
    deadline = time.monotonic() + 8  # room for a loaded machine: with no latest flush, no batch would ever come
    i = 0
    while time.monotonic() < deadline and not got.batches:
        (root / "src" / f"t{i}.py").write_text(f"T = {i}\n")
        i += 1
        time.sleep(0.03)
    assert got.batches, "no batch while events kept coming"


def test_stop_is_idempotent_and_leaves_no_thread(tmp_path):
    root = make_repo(tmp_path / "r", BASIC)
    before = set(threading.enumerate())
    for kwargs in ({}, {"watch_limit": 0, "poll_interval_s": 0.2}):
        got = Batches()
        watcher = Watcher(root, Settings(), got, **kwargs)
        watcher.stop()  # before start: nothing to do
        watcher = Watcher(root, Settings(), got, **kwargs)
        watcher.start()
        assert set(threading.enumerate()) - before
        watcher.stop()
        watcher.stop()
        assert set(threading.enumerate()) - before == set()
    with pytest.raises(RuntimeError):
        watcher.start()
    stopped = Watcher(root, Settings(), Batches())
    stopped.stop()
    with pytest.raises(RuntimeError):
        stopped.start()


def test_stop_from_on_change(tmp_path):
    root = make_repo(tmp_path / "r", BASIC)
    before = set(threading.enumerate())
    done = threading.Event()
    holder: list[Watcher] = []

    def on_change(paths):
        holder[0].stop()
        done.set()

    watcher = Watcher(root, Settings(), on_change, debounce_s=0.05)
    holder.append(watcher)
    watcher.start()
    (root / "README.md").write_text("bye\n")
    assert done.wait(10)
    watcher._thread.join(5)
    assert set(threading.enumerate()) - before == set()
