"""daemon/writer: the daemon's single writer thread over a real git repository and a real LanceDB (fake embedder).

What a user would notice: ``localidx index`` through the daemon answers once its update is done and written, a
burst of edits becomes one update (not one per save), what the writer wrote is there for the next process to read,
a daemon that is stopping says so instead of leaving a client waiting, and an index closed while idle (the daemon's
memory release) opens again for the next edit. The daemon around it is tested over its socket in
tests/test_daemon.py.
"""

from __future__ import annotations

import pytest

from conftest import init_repo
from localidx.config import load_settings
from localidx.daemon.writer import Writer
from localidx.embed.fake import FakeEmbedder
from localidx.paths import index_paths
from localidx.protocol import SHUTTING_DOWN, ProtocolError
from localidx.retrieve import search
from localidx.store.index import open_index

TIMEOUT = 60

FILES = {
    "a.py": "def alpha_total(items):\n    return sum(items)\n",
    "b.py": "def beta_label(name):\n    return name.title()\n",
    "c.py": "def gamma_ratio(x, y):\n    return x / y\n",
}


@pytest.fixture
def setup(tmp_path):
    root = init_repo(tmp_path / "repo", FILES)
    settings = load_settings(root, {"embed_model": "fake", "home": str(tmp_path / "home")})
    writers = []

    def make() -> Writer:
        writer = Writer(root, index_paths(root, True, settings.home), settings, FakeEmbedder())
        writers.append(writer)
        return writer

    yield root, settings, make
    for writer in writers:
        writer.stop()
        writer.join(TIMEOUT)


def indexed(root, settings) -> list[str]:
    index = open_index(root, True, settings, read_only=True)
    try:
        return sorted(index.catalog.paths())
    finally:
        index.close()


def test_a_waiting_request_is_answered_with_its_run_once_the_rows_are_written(setup):
    root, settings, make = setup
    writer = make()
    writer.start()
    record = writer.submit(None, reason="test", wait=True).result(TIMEOUT)
    assert record["files_processed"] == 3 and record["chunks_pending"] == 0
    # Answered after the run ended: a status asked next does not read INDEXING.
    assert not writer.busy
    assert writer.describe()["state"] == "idle" and writer.describe()["last_run"] == record
    # Another process sees what the writer wrote.
    index = open_index(root, True, settings, read_only=True)
    try:
        assert search(index, "gamma ratio", k=1)[0].path == "c.py"
    finally:
        index.close()


def test_a_burst_of_requests_becomes_one_update_of_their_paths(setup):
    root, settings, make = setup
    writer = make()
    first = writer.submit(["a.py"], reason="hook", wait=True)
    second = writer.submit(["b.py"], reason="watch", wait=True)
    writer.submit(["a.py"])
    assert writer.queued() == 2 and writer.busy
    writer.start()
    assert first.result(TIMEOUT) == second.result(TIMEOUT)
    assert writer.runs == 1
    assert indexed(root, settings) == ["a.py", "b.py"]  # c.py was not asked for
    writer.submit(None)
    assert writer.queued() == -1  # everything


def test_a_stopping_writer_fails_waiting_and_new_requests_instead_of_hanging(setup):
    _root, _settings, make = setup
    writer = make()
    queued = writer.submit(None, wait=True)
    writer.stop()
    with pytest.raises(ProtocolError) as info:
        queued.result(TIMEOUT)
    assert info.value.code == SHUTTING_DOWN
    late = writer.submit(["a.py"], wait=True)
    with pytest.raises(ProtocolError):
        late.result(TIMEOUT)
    writer.start()
    writer.join(TIMEOUT)
    assert not writer.is_alive() and writer.phase == "stopped" and writer.runs == 0


def test_an_index_released_while_idle_opens_again_for_the_next_edit(setup):
    root, settings, make = setup
    writer = make()
    writer.start()
    writer.submit(None, wait=True).result(TIMEOUT)
    assert writer.release(TIMEOUT) is True
    (root / "a.py").write_text("def alpha_total(items):\n    return sum(items)\n\n\n"
                               "def delta_median(values):\n    return sorted(values)[len(values) // 2]\n")
    record = writer.submit(["a.py"], wait=True).result(TIMEOUT)
    assert record["files_processed"] == 1 and writer.runs == 2
    index = open_index(root, True, settings, read_only=True)
    try:
        [best] = search(index, "delta median", k=1)
        assert best.path == "a.py" and "def delta_median(values):" in best.text
    finally:
        index.close()
