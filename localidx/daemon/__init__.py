"""The daemon: one long-lived process per work tree that keeps the index current and answers queries warm.

Place in the flow: serve. It owns no indexing or retrieval logic; it schedules ``indexer.sync_work_tree`` and calls
``retrieve.search`` behind the socket protocol.

Invariants:

- **Single writer.** The daemon takes the work tree's ``WriteLock`` at start and holds it for its life. Only its
  writer thread (``writer.py``) mutates the index: it drains a queue of change requests (paths from the watcher,
  the git hooks and ``index/reindex``; ``None`` = everything), coalesces what is queued and runs
  ``indexer.sync_work_tree``. New work interrupts embedding between batches; the first job is a full reconcile, so what
  changed while no daemon ran is indexed on start.
- **Snapshot readers.** Queries run on a few request threads (an event loop owns the connections, so a connection
  costs no thread), each against a read-only ``Index`` with the thread's own catalog connection (sqlite connections
  are per thread), the readers' one shared LanceDB connection and the one shared embedder (``model.SharedModel``:
  loaded once, released when idle). A search reads one pinned table version (``ChunkStore.snapshot()``), so a
  concurrent write never shows it a file half old, half new.
- **One protocol.** Frames, method names, schemas and error codes come from ``localidx.protocol``. Every request
  gets exactly one response; a bad frame gets an error and the connection stays usable; a handler's exception
  becomes ``INTERNAL_ERROR``; a client that goes away never takes the daemon with it. ``routes.py`` is the
  method -> handler table, one module per method under ``handlers/``.
- **Discoverable, private, local.** A status file in the work tree's state dir (``daemon.json``) and a Unix socket
  (mode 0600) in a 0700 runtime dir; no TCP port. ``lifecycle.py`` holds the path and status-file logic and is
  cheap to import, because the client (CLI, git hooks) uses it too.

- **Bounded and frugal.** Threads do not grow with connections; past ``daemon_max_connections`` a client is told
  ``OVERLOADED``. After ``daemon_release_s`` without a query the model and the caches are dropped; subscribers
  (``daemon/subscribe``) are told about changes and do not count as activity.

Modules: ``lifecycle`` (paths, status file, spawning), ``start`` (``localidx daemon run``: the log, the lock, the
model, the writer, the watcher), ``server`` (the event loop, request threads, subscribers, idle release and timeout,
shutdown), ``frames`` (a response as one frame, a failure as a protocol error, the connection cap), ``writer`` (the
writer thread), ``model`` (the shared model), ``memory`` (what the process holds, giving it back), ``routes`` and
``handlers/``.

Layer: above ``retrieve``, ``index`` (its writer thread runs the indexer), ``store``, ``discover`` (the watcher) and
the shared services; below ``interface`` only (``backend`` and ``client`` reach it through ``lifecycle`` and the
socket).
"""
