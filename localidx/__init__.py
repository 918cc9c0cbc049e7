"""localidx: a local-first code indexer.

Only the version lives here: git hooks call the CLI on every commit, so importing the package must stay cheap.
"""

__version__ = "0.1.0"
