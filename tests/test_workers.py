"""The chunking side of indexing (localidx/index/workers.py): results in job order on a pool of real processes, and a
job
that kills its process costs that job only."""

from __future__ import annotations

from pathlib import Path

import pytest

from crash_jobs import crashed, square_or_die, square_or_hang
from localidx.config import load_settings
from localidx.index.workers import chunk_changed_file, crashed_chunking, map_files


@pytest.mark.parametrize("preload_lancedb", [False, True], ids=["fork", "forkserver"])
def test_a_job_that_kills_its_process_costs_that_job_only(preload_lancedb, monkeypatch):
    import sys

    if preload_lancedb:
        import lancedb  # noqa: F401 - the indexer's situation: workers then start from a fork server
    else:
        monkeypatch.delitem(sys.modules, "lancedb", raising=False)
    results = list(map_files(square_or_die, list(range(40)), 2, on_crash=crashed))
    assert results[13] == ("crashed", 13, "the chunker's process died on this file")
    assert results[:13] + results[14:] == [n * n for n in range(40) if n != 13]


def test_a_job_that_never_ends_is_stopped_and_costs_that_job_only(monkeypatch):
    import localidx.index.workers as workers

    monkeypatch.setattr(workers, "BATCH_TIMEOUT_S", 3.0)
    monkeypatch.setattr(workers, "ALONE_TIMEOUT_S", 3.0)
    results = list(map_files(square_or_hang, list(range(24)), 2, on_crash=crashed))
    assert results[5] == ("crashed", 5, "chunking took over 3 s and was stopped")
    assert results[:5] + results[6:] == [n * n for n in range(24) if n != 5]


def test_without_a_crash_handler_a_crash_stops_the_map():
    from concurrent.futures.process import BrokenProcessPool

    with pytest.raises(BrokenProcessPool):
        list(map_files(square_or_die, list(range(40)), 2))


def test_a_file_whose_chunking_crashed_is_kept_as_windows_and_an_error_chunk(tmp_path: Path):
    source = tmp_path / "app.py"
    source.write_text("def handler(request):\n    return respond(request)\n")
    job = ("app.py", str(source), "", load_settings())
    normal = chunk_changed_file(job)
    assert [c.kind for c in normal.chunks.chunks] == ["function"]
    item = crashed_chunking(job, "the chunker's process died on this file")
    assert item.blob == normal.blob and item.stat == normal.stat
    kinds = [c.kind for c in item.chunks.chunks]
    assert kinds[0] == "error" and "window" in kinds
    assert "died" in item.chunks.chunks[0].text and "respond(request)" in item.chunks.chunks[1].text
    assert item.chunks.errors == ["the chunker's process died on this file"]


RACE = '''
import sys, time
sys.path.insert(0, {tests!r})

def main():
    import lancedb  # noqa: F401 - the indexer's situation: workers start from a fork server
    from concurrent.futures import ProcessPoolExecutor
    from crash_jobs import crashed, die_first
    from localidx.index.workers import map_files

    start = ProcessPoolExecutor._spawn_process

    def second_starts_late(self):
        if self._processes:
            time.sleep(1.0)  # a loaded machine: the first worker has taken its job and died by now
        start(self)

    ProcessPoolExecutor._spawn_process = second_starts_late
    results = list(map_files(die_first, list(range(16)), 2, on_crash=crashed))
    print(results[0][0], results[1:] == list(range(1, 16)))

if __name__ == "__main__":
    main()
'''


def test_a_worker_that_dies_while_the_pool_is_still_starting_costs_that_job_only(tmp_path: Path):
    """A job that kills its process before the pool's second worker has started: the map still ends, with that
    job's crash result (workers were started one by one as jobs came, and the pool then waited forever for the
    late one, or failed on a closed queue)."""
    import subprocess
    import sys

    script = tmp_path / "race.py"
    script.write_text(RACE.format(tests=str(Path(__file__).parent)))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["crashed", "True"]
