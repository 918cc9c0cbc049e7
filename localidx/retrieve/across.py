"""Search across repositories: ``localidx search --all-repos``.

Place in the flow: retrieve, above ``search`` and ``localidx.retrieve.shared_index``. It opens every index the per-user
registry lets cross-repository search read (``localidx.index.registry.open_all``: those the user shared, still the
user's) and the views of an organisation's shared index that ``cluster.read`` picks for the query, and ranks them
all in one ``search.search_sources`` call, so scores are comparable across repositories.
``cluster.read`` uses ``search`` to pick its views, so this module, which uses both, sits above them.
"""

from __future__ import annotations

from localidx.errors import UsageError
from localidx.index.registry import open_all
from localidx.retrieve.guard import limit_query
from localidx.retrieve.search import response_depth, search_sources, shape_response
from localidx.retrieve.shared_index import shared_sources


def search_all_repos(query, settings=None, files: bool = False, **options) -> dict:
    """``search.search_response`` over every repository in the per-user registry (``--all-repos``), and the
    organisation's shared index when ``settings.shared_index`` names one (``localidx.retrieve.shared_index``): each
    match
    labelled with its ``repo`` and the ``index`` it came from (``local`` or ``shared``), scores comparable across
    them all (``search.search_sources``); ``warnings`` also name what could not be searched; ``files`` as in
    ``search.search_response``."""
    if not isinstance(query, str):
        raise UsageError("the query must be text")
    query, warnings = limit_query(query)
    opened, problems = open_all()
    views: list = []
    try:
        views, shared_problems = shared_sources(query, settings, [index for _n, index in opened],
                                                **{k: options[k] for k in ("mode", "language", "path_glob", "kind")
                                                   if k in options})
        problems += shared_problems
        if not opened and not views:
            problems.append("no repository to search: `localidx index` registers one, `localidx repos share NAME` "
                            "lets --all-repos read it")
        sources, where = [], {}
        for name, index in opened + views:
            table = index.store.snapshot()
            if table is None:
                problems.append(f"{name}: not indexed yet")
                continue
            sources.append((name, index, table))
            where[name] = "shared" if getattr(index, "has_work_tree", True) is False else "local"
        k, depth = response_depth(options, files)
        found = search_sources(sources, query, k=depth, **options)
    finally:
        for _name, index in opened + views:
            index.close()
    return shape_response([{"repo": name, "index": where[name], **match.to_dict()} for name, match in found], k,
                          files, problems + warnings)
