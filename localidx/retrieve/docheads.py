"""A definition's long doc comment, ranked with the code it documents.

Place in the flow: retrieve (inside ``search``: after fusion, before a question's ranking rules and a name's
definitions). Reads the pinned table by row id (from its in-memory copy when it has one), finding a documented
definition through the version's symbol map; writes nothing.

When the comment above a definition is too long to share a part with the line that names it, the chunker gives its
head a chunk of its own (titled "comment above <kind> <name>"), so that the definition's first part holds its
declaration line. Ranked alone, such a chunk holds the definition's words but none of its code: in heavily
documented code ("how does the runtime shut down blocking threads" on tokio) a method's three doc chunks took three
of the first matches and the code they describe none. So the doc chunks among a search's best candidates give their
score to the definition they document (its first part, the one holding its declaration line): the definition takes
the larger of its own score and theirs, and the doc chunks leave the candidates. Someone whose question the
documentation answers gets the code, with its declaration, once.
"""

from __future__ import annotations

DOC_HEAD_TITLE = "comment above "  # the title ``chunk.code`` gives the head of a long leading comment
DOC_DEPTH = 40  # the best candidates looked at: where a doc chunk can take a place in an answer


def is_doc_head(row: dict) -> bool:
    """True for the chunk of a long doc comment's head (no symbol of its own)."""
    return (row.get("title") or "").startswith(DOC_HEAD_TITLE) and not row.get("symbol")


def documented_symbol(row: dict) -> str:
    """The qualified name a doc chunk documents: "comment above method Handle.block_on" -> "Handle.block_on"."""
    return (row.get("title") or "")[len(DOC_HEAD_TITLE):].split(" ", 1)[-1]


def credit_definitions(table, label, scores: dict[tuple, float], rows: dict[tuple, dict],
                       columns: list[str]) -> None:
    """Move the score of each doc chunk among the ``DOC_DEPTH`` best candidates of ``label`` (``scores`` and
    ``rows`` keyed ``(label, id)``, changed in place) to the first part of the definition it documents, read from
    ``table`` with ``columns``: the nearest chunk below it in its file whose symbol is the documented name."""
    from localidx.retrieve.arms import SymbolMap, taken
    from localidx.retrieve.transforms import fold_name, name_parts

    head = [key for key in sorted(scores, key=lambda key: -scores[key])[:DOC_DEPTH] if key[0] == label]
    missing = [rows[key]["_rowid"] for key in head if "title" not in rows[key] and "_rowid" in rows[key]]
    if missing:
        for row in taken(table, missing, columns, with_row_id=True):
            rows[(label, row["id"])] = row
    docs = [key for key in head if is_doc_head(rows[key])]
    if not docs:
        return
    wanted = {(rows[key]["path"], documented_symbol(rows[key])) for key in docs}
    symbols = SymbolMap.of(table)  # the rows naming each, through the version's symbol map (no scan of the table)
    ids: set[int] = set()
    for _path, symbol in wanted:
        parts = name_parts(symbol)
        if parts:
            ids.update(symbols.row_ids(fold_name(parts[-1])))
    found = [row for row in taken(table, sorted(ids), columns, with_row_id=True)
             if row["chunk_index"] == 0 and (row["path"], row["symbol"]) in wanted] if ids else []
    for key in docs:
        doc = rows[key]
        below = [row for row in found if row["path"] == doc["path"] and row["symbol"] == documented_symbol(doc)
                 and row["start_line"] > doc["start_line"]]
        if not below:
            continue
        definition = min(below, key=lambda row: row["start_line"])
        target = (label, definition["id"])
        rows.setdefault(target, definition)
        scores[target] = max(scores.get(target, 0.0), scores.pop(key))
