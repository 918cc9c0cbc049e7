"""Store: an index on disk, written only by ``localidx.index.indexer``, read by ``retrieve`` at a pinned version.

- ``lance``      the LanceDB chunk tables (imported through ``lancedb_import``); ``vectors`` the embedding cache;
                 ``hot`` an in-memory copy of a table version for the query path
- ``catalog``    the SQLite catalog per work tree: what is indexed, at which content hash, and the problems found
- ``relations``  call relations: per-file definitions, calls and imports, resolved on read
- ``index``      opening an index: the typed ``Index``, generations, damage found and marked
- ``lock``       one writer per index, across processes (``flock``)

Layer: above ``chunk`` (the records and the [META] version it stores) and the shared services (``paths``, ``config``,
``embed``); below ``index``, ``cluster``, ``retrieve``, ``daemon`` and ``interface``. One late import runs up:
``index.open_store`` asks ``localidx.index.explain.table_variant`` for the chunk table's name (docs/architecture.md).
"""
