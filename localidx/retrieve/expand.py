"""Neighbour expansion: add the code around or connected to the best matches.

Place in the flow: retrieve -> rerank -> **expand** -> merge -> budget. Read-only: rows come from the pipeline's
pinned table version, call edges from ``localidx.store.relations``.

Strategies (``neighborStrategy``):
- ``OFF``: nothing added.
- ``LINEAR``: the chunks just before and after a hit in its file (``neighborRadius`` on each side), skipping chunks
  that contain it or that it contains (a class skeleton around a method) and file summaries.
- ``PARENT_SYMBOL``: the enclosing symbol's chunk (the class skeleton of a method) and the nearest siblings under the
  same parent (``neighborRadius`` on each side).
- ``CALL_GRAPH``: callees and callers of a hit, by the call relations, most confident first.

The first ``neighborHits`` matches are expanded; at most ``neighborLimit`` chunks are added in all and never more
than ``guard.EXPANSION_CAP`` rows are read. An added chunk comes right after the hit it expands, carries
``neighborOfSpanHash`` (the hit's span hash) and ``neighborStrategy``, and scores a little under its hit. A chunk
already in the list (same id or same content) is not added again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from localidx.retrieve.guard import EXPANSION_CAP

if TYPE_CHECKING:
    from localidx.retrieve.profiles import Profile

log = logging.getLogger(__name__)

NEIGHBOR_SCORE = 0.9  # an added chunk's score, relative to its hit's
_SKIP_KINDS = ("summary", "error")


def _file_rows(table, paths: list[str]) -> dict[str, list[dict]]:
    from localidx.retrieve.search import COLUMNS
    from localidx.store.lance import sql_in

    if not paths:
        return {}
    rows = table.search().where(sql_in("path", paths)).select(COLUMNS).limit(EXPANSION_CAP).to_list()
    by_path: dict[str, list[dict]] = {}
    for row in rows:
        by_path.setdefault(row["path"], []).append(row)
    for items in by_path.values():
        items.sort(key=lambda r: (r["start_line"], -r["end_line"], r["chunk_index"] or 0))
    return by_path


def _disjoint(a: dict, b: dict) -> bool:
    return a["end_line"] < b["start_line"] or b["end_line"] < a["start_line"]


def _linear(hit: dict, rows: list[dict], radius: int) -> list[dict]:
    candidates = [r for r in rows if r["kind"] not in _SKIP_KINDS and r["id"] != hit["id"] and _disjoint(r, hit)]
    before = [r for r in candidates if r["end_line"] < hit["start_line"]]
    after = [r for r in candidates if r["start_line"] > hit["end_line"]]
    before.sort(key=lambda r: -r["end_line"])
    after.sort(key=lambda r: r["start_line"])
    out: list[dict] = []
    for i in range(radius):  # nearest first, alternating sides
        for side in (before, after):
            if i < len(side):
                out.append(side[i])
    return out


def _parent_symbol(hit: dict, rows: list[dict], radius: int) -> list[dict]:
    parent_id = hit.get("parent_id") or ""
    out: list[dict] = []
    if parent_id:
        out.extend(r for r in rows if r["id"] == parent_id)
    siblings = [r for r in rows if (r["parent_id"] or "") == parent_id and r["id"] != hit["id"]
                and r["kind"] not in _SKIP_KINDS and _disjoint(r, hit)]
    out.extend(_linear(hit, siblings, radius))
    return out


def _call_graph(hit: dict, relations, store, table, per_hit: int) -> list[dict]:
    """Callees and callers of the hit, alternating (each list most confident first), at most ``per_hit``."""
    if relations is None:
        return []
    callees = [e.callee_id for e in relations.callees(hit["id"], limit=per_hit)]
    callers = [e.caller_id for e in relations.callers(hit["id"], limit=per_hit)]
    ids: list[str] = []
    for pair in zip(callees + [None] * len(callers), callers + [None] * len(callees)):
        for other in pair:
            if other and other != hit["id"] and other not in ids:
                ids.append(other)
    from localidx.retrieve.search import COLUMNS

    ids = ids[:per_hit]  # per_hit <= neighborLimit <= EXPANSION_CAP
    rows = {row["id"]: row for row in store.rows_by_id(ids, COLUMNS, table=table)}
    return [rows[i] for i in ids if i in rows]


def expand(matches: list[dict], profile: Profile, store, table, staleness, relations=None) -> tuple[list[dict], int]:
    """(the matches with neighbours inserted after their hits, how many were added)."""
    from localidx.retrieve.search import match_from_row

    strategy = profile.neighbor_strategy
    limit = min(profile.neighbor_limit, EXPANSION_CAP)
    hits = matches[: profile.neighbor_hits]
    if strategy == "OFF" or limit <= 0 or not hits:
        return matches, 0
    radius = max(1, profile.neighbor_radius)
    by_path = _file_rows(table, sorted({h["path"] for h in hits})) if strategy in ("LINEAR", "PARENT_SYMBOL") else {}
    seen_ids = {m["id"] for m in matches}
    seen_content = {m.get("content_hash") for m in matches if m.get("content_hash")}
    added_after: dict[str, list[dict]] = {}
    added = 0
    for hit in hits:
        if added >= limit:
            break
        if strategy == "LINEAR":
            found = _linear(hit, by_path.get(hit["path"], []), radius)
        elif strategy == "PARENT_SYMBOL":
            found = _parent_symbol(hit, by_path.get(hit["path"], []), radius)
        else:
            found = _call_graph(hit, relations, store, table, per_hit=limit - added)
        for row in found:
            if added >= limit:
                break
            if row["id"] in seen_ids or (row.get("content_hash") and row["content_hash"] in seen_content):
                continue
            seen_ids.add(row["id"])
            if row.get("content_hash"):
                seen_content.add(row["content_hash"])
            match = match_from_row(row, float(hit["score"]) * NEIGHBOR_SCORE, None, None, staleness).to_dict()
            match["neighborOfSpanHash"] = hit.get("span_hash", "")
            match["neighborStrategy"] = strategy
            match["reasons"] = [f"{strategy.lower()} neighbour of {hit['path']}:{hit['start_line']}-{hit['end_line']}"]
            if "repo" in hit:
                match["repo"] = hit["repo"]
            added_after.setdefault(hit["id"], []).append(match)
            added += 1
    out: list[dict] = []
    for match in matches:
        out.append(match)
        out.extend(added_after.get(match["id"], []))
    return out, added
