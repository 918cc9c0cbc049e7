"""A laptop's read-only view of a shared organisation index, beside its own registry of local indexes.

Place in the flow: retrieve, for ``search --all-repos``, ``context --all-repos`` and MCP's ``rag_search_global``
(``shared_index`` in the settings: ``LOCALIDX_SHARED_INDEX``, ``.localidx.toml`` or ``[tool.localidx]``; the URI only,
credentials come from the environment). Needs nothing beyond localidx itself: no Ray.

Invariants:
- Read-only: nothing here writes to the shared database. Each query reads one pinned version of the chunk table.
- **Your own work tree wins.** An org repository whose identity (``manifest.identity``: its URL, or a path) is that of
  a locally indexed work tree (its root or any of its remotes) is left out of the shared results entirely, so a fresh
  edit is never hidden behind, or duplicated by, the org's copy of an older commit.
- Results say where they came from: a shared match's ``repo`` is ``<name>@shared`` (so citations read
  ``payments@shared:src/x.py:1-20``), and ``index`` is ``shared`` (``local`` for the registry's).
- A shared match is never ``stale``: it is the text of the org's commit, and this machine has no work tree of it
  to compare with (``has_work_tree = False``).

How a query reads it: one search over the whole shared table (minus the repositories left out) finds which org
repositories hold candidates; then each of the best ``MAX_SHARED_REPOS`` of them is a source of its own (a *view*:
the table filtered to that repository), searched, reranked and expanded exactly like a local index. At 2,000
repositories that is one plus a handful of searches, not two thousand.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

SHARED_LABEL = "shared"
CANDIDATE_MATCHES = 50  # the first, org-wide search: how many matches decide which repositories are searched
MAX_SHARED_REPOS = 8


class _FilteredQuery:
    """A LanceDB query builder whose every ``where`` is ANDed with the view's clause (set before anything else)."""

    def __init__(self, inner, clause: str):
        self._inner = inner.where(clause, prefilter=True)
        self._clause = clause

    def where(self, where: str, prefilter: bool = True):
        self._inner = self._inner.where(f"({self._clause}) AND ({where})", prefilter=prefilter)
        return self

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            result = attr(*args, **kwargs)
            if result is self._inner or type(result) is type(self._inner):
                self._inner = result
                return self
            return result

        return call


class _FilteredTable:
    """A pinned LanceDB table seen through a filter (one repository, or all but the ones left out). Only what
    retrieval reads is offered (``search``, ``count_rows``, ``version``, and ``take_row_ids`` for the row ids its own
    filtered searches returned), so nothing reads past the filter."""

    def __init__(self, table, clause: str | None):
        self._table = table
        self._clause = clause

    @property
    def version(self) -> int:
        return self._table.version

    def search(self, *args, **kwargs):
        query = self._table.search(*args, **kwargs)
        return _FilteredQuery(query, self._clause) if self._clause else query

    def take_row_ids(self, row_ids):
        """Rows by row id, for search's late materialisation of the row ids this view's searches returned (a take
        cannot be filtered: LanceDB's take query has no ``where``)."""
        return self._table.take_row_ids(row_ids)

    def count_rows(self, filter: str | None = None) -> int:  # noqa: A002 - LanceDB's own argument name
        clauses = [c for c in (self._clause, filter) if c]
        return self._table.count_rows(" AND ".join(f"({c})" for c in clauses) if clauses else None)


class _ViewStore:
    """The part of ``ChunkStore``'s reading API that retrieval uses, over a filtered shared table."""

    def __init__(self, table, clause: str | None, table_name: str):
        self._table = table
        self.clause = clause
        self.table_name = table_name
        self.generation = 0

    def exists(self) -> bool:
        return True

    def snapshot(self):
        return _FilteredTable(self._table, self.clause)

    def version(self) -> int:
        return self._table.version

    def rows_by_id(self, ids: list[str], columns: list[str], table=None) -> list[dict]:
        from localidx.store.lance import sql_in

        table = table if table is not None else self.snapshot()
        out = []
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            out.extend(table.search().where(sql_in("id", part)).select(columns).limit(len(part)).to_arrow()
                       .to_pylist())
        return out


@dataclass
class SharedView:
    """An org repository (or the whole org table) read like a local ``Index``: the same searches, rerank, expansion;
    no work tree here, no call relations (an empty catalog)."""

    paths: object  # IndexPaths of a local cache dir: where a reader's damage note would go
    settings: object
    catalog: object
    store: _ViewStore
    embedder: object
    generation: int = 0
    has_work_tree: bool = False

    def close(self) -> None:
        self.catalog.close()


@dataclass
class Shared:
    """An opened shared database: its pinned chunk table and its repositories."""

    uri: str
    label: str
    table: object
    table_name: str
    repos: list = field(default_factory=list)  # rows of the repos table
    settings: object = None
    embedder: object = None

    def view(self, clause: str | None, key: str) -> SharedView:
        import platformdirs

        from localidx.paths import IndexPaths
        from localidx.store.catalog import Catalog

        digest = hashlib.sha256(f"{self.uri}\0{key}".encode()).hexdigest()[:16]
        state = Path(platformdirs.user_cache_dir("localidx")) / "shared" / digest
        paths = IndexPaths(root=state, state=state, worktree_key=digest)
        return SharedView(paths=paths, settings=self.settings, catalog=Catalog(paths.catalog_for(0), create=False),
                          store=_ViewStore(self.table, clause, self.table_name), embedder=self.embedder)

    def views_for(self, query: str, exclude: set[str], mode: str = "hybrid", language=None, path_glob=None,
                  kind=None) -> list[tuple[str, SharedView]]:
        """``(label, view)`` for the org repositories that hold the best candidates for ``query``, best first, at most
        ``MAX_SHARED_REPOS``; repositories whose identity is in ``exclude`` are never among them."""
        from localidx.retrieve.search import search
        from localidx.store.lance import sql_in, sql_str

        left_out = [r["repo"] for r in self.repos if r["identity"] in exclude]
        clause = f"NOT ({sql_in('repo', left_out)})" if left_out else None
        whole = self.view(clause, "*")
        try:
            matches = search(whole, query, k=CANDIDATE_MATCHES, mode=mode, language=language, path_glob=path_glob,
                             kind=kind)
        finally:
            whole.close()
        ids = [m.id for m in matches]
        if not ids:
            return []
        owners: dict[str, list[str]] = {}
        rows = (whole.store.snapshot().search().where(sql_in("id", ids)).select(["id", "repo"])
                .limit(len(ids) * 4).to_arrow().to_pylist())
        for row in rows:
            owners.setdefault(row["id"], []).append(row["repo"])
        ranked: list[str] = []
        for match_id in ids:
            for repo in sorted(owners.get(match_id, [])):
                if repo not in ranked:
                    ranked.append(repo)
        return [(f"{repo}@{SHARED_LABEL}", self.view(f"repo = {sql_str(repo)}", repo))
                for repo in ranked[:MAX_SHARED_REPOS]]


def open_shared(settings, embedder=None) -> tuple[Shared | None, list[str]]:
    """The shared index named by ``settings.shared_index`` for this machine's model, or None (with the reason as a
    warning line when one is configured but cannot be read). Only the redacted URI ever appears in a warning."""
    from localidx.cluster.manifest import redact_url
    from localidx.cluster.shared import SharedDB

    uri = getattr(settings, "shared_index", "") or ""
    if not uri:
        return None, []
    label = redact_url(uri)
    try:
        if embedder is None:
            from localidx.embed import get_embedder

            embedder = get_embedder(settings.embed_model, threads=settings.embed_threads or None)
        db = SharedDB(uri, embedder.model_id, embedder.dim)
        table = db.open(db.names.chunks)
        if table is None:
            return None, [f"the shared index {label} has no table for the model {embedder.model_id} "
                          f"(`localidx cluster status {label}` lists what it holds)"]
        table.checkout(table.version)
        return Shared(uri=uri, label=label, table=table, table_name=db.names.chunks, repos=db.repos(),
                      settings=settings, embedder=embedder), []
    except Exception as exc:  # noqa: BLE001 - an unreachable shared index costs its results, never the local ones
        reason = " ".join(str(exc).split()).replace(uri, label)[:200]
        return None, [f"the shared index {label} cannot be read ({type(exc).__name__}: {reason})"]


def local_identities(indexes) -> set[str]:
    """The identities of locally indexed work trees (``Index`` objects): each root, and each of its git remotes."""
    import os

    from localidx import gitrepo
    from localidx.cluster.manifest import identity

    found: set[str] = set()
    for index in indexes:
        root = Path(index.paths.root)
        found.add(identity(str(root)))
        repo = gitrepo.open_repo(root)
        for remote in repo.remotes if repo is not None else []:
            url = remote.url or ""
            remote_syntax = "://" in url or ":" in url.split("/")[0]
            if url and not remote_syntax and not os.path.isabs(url):
                url = str(root / url)  # a remote given as a relative path
            if url:
                found.add(identity(url))
    return found


def shared_sources(query: str, settings, local_indexes, mode: str = "hybrid", language=None, path_glob=None,
                   kind=None) -> tuple[list[tuple[str, SharedView]], list[str]]:
    """What ``--all-repos`` adds to the local indexes: ``([(label, view)], warnings)``; nothing when no shared index
    is configured. The caller closes the views."""
    if settings is None or not getattr(settings, "shared_index", ""):
        return [], []
    # The local indexes' embedder for this model, when one is loaded already.
    embedder = next((i.embedder for i in local_indexes if i.settings.embed_model == settings.embed_model), None)
    shared, warnings = open_shared(settings, embedder)
    if shared is None:
        return [], warnings
    try:
        return shared.views_for(query, local_identities(local_indexes), mode=mode, language=language,
                                path_glob=path_glob, kind=kind), warnings
    except Exception as exc:  # noqa: BLE001 - the shared index failing costs its results, never the local ones
        reason = " ".join(str(exc).split()).replace(shared.uri, shared.label)[:200]
        return [], warnings + [f"the shared index {shared.label} failed ({type(exc).__name__}: {reason})"]


# -- status ------------------------------------------------------------------------------------------------------


def status(uri: str) -> dict:
    """What the shared database at ``uri`` holds, per model (the table sets of ``localidx.cluster.shared``): rows,
    version, indexes and every repository's URL (redacted), ref, commit and last outcome. Never a credential."""
    import lancedb

    from localidx.cluster.manifest import redact_url

    label = redact_url(uri)
    db = lancedb.connect(uri)
    result = db.list_tables()
    names = set(getattr(result, "tables", result))
    sets = []
    for repos_name in sorted(n for n in names if n.startswith("org_repos_")):
        suffix = repos_name[len("org_repos_"):]
        chunks_name = f"org_chunks_{suffix}"
        entry: dict = {"tables": suffix, "repos": sorted(db.open_table(repos_name).to_arrow().to_pylist(),
                                                         key=lambda r: r["repo"])}
        if chunks_name in names:
            chunks = db.open_table(chunks_name)
            entry.update(chunks=chunks.count_rows(), version=chunks.version,
                         indexes=sorted(f"{i.index_type}({', '.join(i.columns)})" for i in chunks.list_indices()))
        for repo in entry["repos"]:
            repo["url"] = redact_url(repo.get("url") or "")
        sets.append(entry)
    return {"uri": label, "sets": sets}
