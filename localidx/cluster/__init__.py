"""Beyond one machine: an organisation's repositories indexed by a Ray job into shared Lance tables.

Place in the flow: a second writer, for a shared database, beside the local indexer; and a second kind of source for
the cross-repository readers (``--all-repos``, MCP's ``rag_search_global``).

- ``manifest``  the repositories (URL or path, ref), names, identities, credential rules
- ``shared``    the shared database: tables, schemas, the job's single commits, index builds
- ``stages``    what runs in the Ray tasks and actors: checkout, discover, chunk, embed, write (the library's code)
- ``pipeline``  the Ray Data job that wires the stages, and the driver's commit

A laptop's read-only view of the shared database, its own work trees winning, is a retrieval source:
``localidx.retrieve.shared_index``.

Only ``pipeline`` (and ``stages``' writer) needs the ``cluster`` extra (Ray, Lance's Ray integration); reading a
shared index needs nothing beyond localidx itself.

Layer: above ``index`` (its stages run the library's own discovery, chunking and embedding), ``store`` and ``chunk``;
below ``retrieve`` (``retrieve.shared_index`` reads the shared database through ``manifest`` and ``shared``) and
``interface``.
"""
