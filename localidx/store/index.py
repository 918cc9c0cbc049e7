"""Opening an index: the catalog and the chunk table of one work tree, around an embedder. Reading, not writing.

Place in the flow: store (below retrieve, status, the daemon and the writer, which all open indexes through here).

**Generations.** A work tree's index is one *generation*: a catalog file and the chunk table it is bound to. The
number of the current one is in ``<worktree state>/generation`` (absent: 0, the layout of indexes made before
generations). A rebuild writes generation N+1 beside N, and only when it is written does the writer switch the
pointer (one atomic rename), so searches keep answering from N while N+1 is built and a rebuild killed early leaves
N as it was. Generation 0's files are ``catalog.sqlite`` and ``chunks_...``; generation N's ``catalog-gN.sqlite`` and
``chunks_..._gN``. Readers follow the pointer each time they open. An asked-for rebuild drops N as soon as it
switches (no file keeps text the work tree no longer has), so a reader still on N may find it gone: that is
``IndexSwitched`` (``switched``, ``pinned``, ``reading``), never damage, and the CLI reads again on N+1.

**Damage.** ``diagnose`` checks the catalog and the table against each other without writing, and names each kind
of damage in one line (``Damage.line``): a catalog that is not a database, a table that is missing or cannot be read,
files the catalog records whose rows are gone, rows the catalog does not vouch for, an unreadable vector cache, and
damage a reader ran into (``mark_damaged``: a marker file, the only thing a reader writes, so that a plain
``localidx index`` knows to repair what a search found). ``status`` reports it; the writer repairs it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from localidx.config import Settings
from localidx.errors import IndexDamaged, IndexSwitched, disk_full

if TYPE_CHECKING:
    from localidx.embed import Embedder
    from localidx.paths import IndexPaths
    from localidx.store.catalog import Catalog
    from localidx.store.lance import ChunkStore

log = logging.getLogger(__name__)

DAMAGE_MARKER = "damaged"  # in the work tree's state dir: damage a reader found, for the next writer to repair


@dataclass
class Index:
    """An opened index: where it lives, its catalog, its chunk table and the embedder its vectors come from."""

    paths: IndexPaths
    settings: Settings
    catalog: Catalog
    store: ChunkStore
    embedder: Embedder
    generation: int = 0

    def close(self) -> None:
        self.catalog.close()


def open_index(root: Path, in_git: bool, settings: Settings, read_only: bool = False, embedder=None) -> Index:
    """Open (or, for writing, create) the index of the work tree at ``root``; ``embedder`` reuses a loaded model
    (the daemon's) instead of making one."""
    from localidx.paths import index_paths

    return open_index_at(index_paths(root, in_git, settings.home), settings, read_only=read_only, embedder=embedder)


def open_index_at(paths: IndexPaths, settings: Settings, read_only: bool = False, embedder=None, store=None,
                  generation: int | None = None) -> Index:
    """``open_index`` for known ``IndexPaths``, at the current generation unless ``generation`` names one.

    Read-only opens write nothing (a missing index reads as empty); a catalog that is not a database raises
    ``IndexDamaged``. ``store``: a ChunkStore to share when it is of the same generation (the daemon's readers
    share one LanceDB connection, and so its index caches)."""
    from localidx.embed import get_embedder
    from localidx.store.catalog import Catalog

    if not read_only:
        from localidx.paths import make_private

        make_private(paths)
    if generation is None:
        generation = paths.generation()
    embedder = embedder or get_embedder(settings.embed_model, threads=settings.embed_threads or None)
    if store is None or store.generation != generation:
        store = open_store(paths, settings, embedder, read_only=read_only, generation=generation)
    catalog = Catalog(paths.catalog_for(generation), create=not read_only)
    return Index(paths=paths, settings=settings, catalog=catalog, store=store, embedder=embedder,
                 generation=generation)


def open_store(paths: IndexPaths, settings: Settings, embedder, read_only: bool = False,
               generation: int | None = None) -> ChunkStore:
    """The ChunkStore of the work tree at ``paths`` for this model and these settings (current generation)."""
    from localidx.index.explain import table_variant
    from localidx.store.lance import ChunkStore

    return ChunkStore(paths.lancedb, paths.worktree_key, embedder.model_id, embedder.dim, read_only=read_only,
                      variant=table_variant(settings),
                      generation=paths.generation() if generation is None else generation,
                      cache_path=paths.vector_cache)


# -- damage -------------------------------------------------------------------------------------------------------


@dataclass
class Damage:
    """One kind of damage found by ``diagnose``. ``rebuild``: only a new generation repairs it."""

    kind: str  # catalog | table-missing | table-unreadable | rows-missing | orphan-rows | cache-unreadable | marked
    detail: str
    rebuild: bool = False
    paths: list[str] = field(default_factory=list)  # rows-missing / orphan-rows: the files concerned

    def line(self) -> str:
        """What happened and what ``localidx index`` does about it, in one line."""
        remedy = {
            "catalog": "the index is rebuilt from the files (vectors come from the cache)",
            "table-missing": "the index is rebuilt from the files (vectors come from the cache where it survived)",
            "table-unreadable": "the index is rebuilt from the files (vectors come from the cache where it survived)",
            "rows-missing": "those files are indexed again",
            "orphan-rows": "those rows are removed",
            "cache-unreadable": "the vector cache is emptied and missing vectors are embedded again",
            "marked": "the index is rebuilt from the files (vectors come from the cache where it survived)",
        }[self.kind]
        return f"{self.detail}: {remedy}"


def mark_damaged(paths: IndexPaths, reason: str) -> None:
    """Leave a note for the next writer that a reader found the index damaged (best effort, never raises)."""
    try:
        paths.worktree.mkdir(parents=True, exist_ok=True)
        (paths.worktree / DAMAGE_MARKER).write_text(reason.splitlines()[0][:500] + "\n", encoding="utf-8")
    except OSError:
        pass


def damage_marked(paths: IndexPaths) -> str | None:
    try:
        return (paths.worktree / DAMAGE_MARKER).read_text(encoding="utf-8").strip() or "damage found by a reader"
    except OSError:
        return None


def clear_damage_mark(paths: IndexPaths) -> None:
    try:
        (paths.worktree / DAMAGE_MARKER).unlink()
    except OSError:
        pass


def storage_error(exc: BaseException) -> str | None:
    """The one-line reason when ``exc`` is LanceDB failing to read its own files (damage), else None."""
    text = str(exc)
    if isinstance(exc, (RuntimeError, OSError, ValueError)) and ("lance error" in text or "LanceError" in text):
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        return first.split(", /rustc/")[0][:300]
    return None


SWITCHED = "the index was rebuilt while this command read it: run it again"


def switched(index: Index) -> bool:
    """Whether a rebuild has moved the work tree's index past the generation ``index`` was opened at (an asked-for
    rebuild drops the old generation as soon as it switches, so such a reader may find its files gone)."""
    return index.paths.generation() != index.generation


def reading(index: Index, action):
    """Run ``action()`` (a read of ``index``'s table). Any failure once a rebuild has replaced the generation being
    read is ``IndexSwitched``: nothing is damaged. Else LanceDB failing on its own files becomes ``IndexDamaged``
    with the remedy, and leaves the marker for the next writer."""
    try:
        return action()
    except (IndexDamaged, IndexSwitched):
        raise
    except Exception as exc:
        if switched(index):
            raise IndexSwitched(SWITCHED) from None
        full = disk_full(exc, index.paths.state)
        if full is not None:
            raise full from None
        reason = storage_error(exc)
        if reason is None:
            raise
        paths = index.paths
        mark_damaged(paths, f"a read of the chunk table failed: {reason}")
        raise IndexDamaged(f"the index at {paths.state} is damaged ({reason}); run `localidx index` to repair it") \
            from None


def pinned(index: Index):
    """``index``'s chunk table pinned at its latest version (``ChunkStore.snapshot``), read as ``reading`` reads;
    None when nothing is indexed, ``IndexSwitched`` when a rebuild dropped the generation ``index`` was opened at."""
    table = reading(index, index.store.snapshot)
    if table is None and switched(index):
        raise IndexSwitched(SWITCHED)
    return table


def diagnose(index: Index) -> list[Damage]:
    """Check the catalog and the chunk table against each other (reading ids and paths only; see the docstring)."""
    found = _table_damage(index)
    marked = damage_marked(index.paths)
    if marked and not any(d.rebuild for d in found):  # what a reader saw, when the check above does not see it
        found.insert(0, Damage("marked", f"a reader found damage ({marked})", rebuild=True))
    return found + _cache_damage(index.store)


def _table_damage(index: Index) -> list[Damage]:
    found: list[Damage] = []
    records = index.catalog.files()
    vouched = {p: set(r.chunk_ids) for p, r in records.items() if r.chunk_ids}
    store = index.store
    if not store.exists():
        if vouched:
            found.append(Damage("table-missing", f"the chunk table is missing while the catalog records "
                                f"{len(vouched)} indexed files", rebuild=True))
        return found
    try:
        rows = store.ids_by_path()
    except Exception as exc:
        reason = storage_error(exc) or f"{type(exc).__name__}: {exc}".splitlines()[0]
        return [Damage("table-unreadable", f"the chunk table cannot be read ({reason})", rebuild=True)]
    missing = sorted(p for p, ids in vouched.items() if not ids <= rows.get(p, set()))
    if missing:
        found.append(Damage("rows-missing", f"{len(missing)} indexed files have lost rows "
                            f"(first: {missing[0]})", paths=missing))
    if not index.catalog.dirty:  # a dirty catalog's extra rows are the interrupted run's, removed as usual
        orphans = sorted(p for p, ids in rows.items() if not ids <= vouched.get(p, set()))
        if orphans:
            found.append(Damage("orphan-rows", f"{len(orphans)} files have rows the catalog does not record "
                                f"(first: {orphans[0]})", paths=orphans))
    return found


def _cache_damage(store) -> list[Damage]:
    try:
        store.check_cache()
    except Exception as exc:
        from localidx.errors import disk_full

        full = disk_full(exc, store.cache.path.parent)  # SQLite cannot map its WAL index on a full disk: not damage
        if full is not None:
            raise full from None
        reason = storage_error(exc) or f"{type(exc).__name__}: {exc}".splitlines()[0]
        return [Damage("cache-unreadable", f"the vector cache cannot be read ({reason})")]
    return []


def discard_generation(paths: IndexPaths, generation: int) -> None:
    """Remove a generation's catalog files (its table is dropped by the store); missing files are fine."""
    catalog = paths.catalog_for(generation)
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(f"{catalog}{suffix}")
        except OSError:
            pass
