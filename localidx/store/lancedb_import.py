"""``import lancedb`` without its namespace client's API, which only a remote namespace uses.

LanceDB imports ``lance_namespace``, whose models come from ``lance_namespace_urllib3_client``; that package's own
``__init__`` also imports its generated REST API classes (hundreds of pydantic-validated methods): 1.6 of the 2.7
seconds ``import lancedb`` took on a loaded 2-core machine (0.9 of 1.9 CPU-seconds), before localidx has done
anything. Local tables never call that API. ``import_lancedb`` registers the package with its ``__path__`` but runs
its ``__init__`` only when something first reads a name from it (``from lance_namespace_urllib3_client import
ApiClient``, an attribute): its submodules (the models LanceDB imports) load as usual, and whatever later needs the
package gets all of it, loaded then.

Nothing is changed when the package is already imported, is not there, or is not a package (another LanceDB).
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import types

DEFERRED = "lance_namespace_urllib3_client"
_lock = threading.RLock()


class _Deferred(types.ModuleType):
    """A package whose ``__init__`` runs when a name it defines is first read."""

    def __getattr__(self, name: str):  # only called for names the module does not have yet
        with _lock:
            if type(self) is _Deferred:
                self.__class__ = types.ModuleType
                self.__spec__.loader.exec_module(self)
        return getattr(self, name)


def defer_namespace_client() -> None:
    """Register ``lance_namespace_urllib3_client`` to run its ``__init__`` on first use (see the module)."""
    with _lock:
        if DEFERRED in sys.modules:
            return
        spec = importlib.util.find_spec(DEFERRED)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return
        module = importlib.util.module_from_spec(spec)
        module.__class__ = _Deferred
        sys.modules[DEFERRED] = module


def import_lancedb():
    """The ``lancedb`` module, imported with its namespace client deferred."""
    if "lancedb" not in sys.modules:
        defer_namespace_client()
    import lancedb

    return lancedb
