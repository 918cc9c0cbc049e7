"""Index: the indexing pass, the single writer of an index, and what reports on it.

- ``indexer``   changes -> chunks -> rows -> vectors: the only code that mutates the store (repair, rebuild beside,
                switch, resume where a killed run stopped)
- ``workers``   the chunking jobs on every core, a crash or a hang costing its file only
- ``explain``   the optional index-time stage that adds an LLM explanation to each code chunk (``summarize``)
- ``registry``  the per-user list of indexes, written at the end of every successful pass
- ``status``    what ``localidx status`` reports, read-only; ``dryrun`` the dry run (nothing written); ``preview``
                how files are chunked, for ``localidx chunks``

Layer: above ``store`` (it writes through it), ``chunk``, ``discover``, ``embed`` and the shared services (``config``,
``paths``, ``llm``); below ``cluster``, ``retrieve``, ``daemon`` and ``interface``, which may import it. Two imports
run up into it, each late and named in docs/architecture.md: ``store.index`` asks ``explain.table_variant`` for the
chunk table's name (the explanations are part of a table's identity), and ``discover.root`` asks the ``registry``
for the nearest indexed directory outside git.
"""
