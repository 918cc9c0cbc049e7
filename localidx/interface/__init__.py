"""Interface: where a user, an editor or an agent meets localidx, the last step of the flow (serve).

- ``entry``       the ``localidx`` script: a plain search while the daemon runs is answered without loading click;
                  every other command line goes to ``cli.main``
- ``cli``         the click commands that index and query (thin: parse, call the library, print); ``cli_manage``
                  the commands around an index (hooks, hook-run, daemon, protocol, mcp, trust, repos, cluster),
                  registered on the same group
- ``console``     what the commands print and how they end on an error, without click; ``highlight`` the lines of
                  a match worth showing, the query's terms marked
- ``backend``     the daemon or this process: one call per operation, the same dicts either way
- ``client``      the socket protocol's client side: connect, hello, request (the VS Code bridge has its own)
- ``mcp_server``  the MCP tools, thin adapters over ``backend``
- ``githooks``    installing the git hooks politely and turning what git did into one reindex pass

Layer: the top. It may import every layer below (``daemon``, ``retrieve``, ``cluster``, ``index``, ``store``,
``chunk``, ``discover``, the shared services and the bottom); nothing in the package imports it but
``localidx.__main__``. Heavy imports (lancedb, tree-sitter, the model) happen inside the commands that need them, so
``localidx --help`` and the hooks start fast.
"""
