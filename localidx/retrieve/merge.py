"""Auto-merge and the context budget: the last two stages before a pack is served.

Place in the flow: retrieve -> rerank -> expand -> **merge -> budget**. Pure: matches in, matches out.

Auto-merge: walking the list in its (reranked) order, each match not yet used seeds a window; the window grows to
the left and right by absorbing other matches of the same file whose lines touch it (at most ``MAX_GAP`` lines
apart, or overlapping like the parts of a split symbol) while the window's tokens stay within the budget. A chunk
that contains the window or lies inside it (a class skeleton and one of its methods) is not merged: their texts are
different views of the same lines. No chunk appears twice; a window takes its seed's place. A window of two or more
chunks carries ``auto_merged``, ``merged_chunk_ids``, ``merged_chunk_count``, ``chunk_span {start, end}`` and
``content_length``; its text is its chunks' texts in line order, overlap lines once, blank lines for the gaps.

Budget: matches are kept in order while their tokens (text plus a citation line) fit ``maxContextTokens``; one that
does not fit is skipped and smaller later ones may still fit. At least one match is always kept: when the first one
alone is over the budget, its text is cut to fit and it is marked ``truncated``.

Tokens are counted with tiktoken's cl100k (``localidx.tokens``), or ``len(text) // 4`` when that is unavailable.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

MAX_GAP = 2  # blank lines (or lines of chunks not in the list) a merge may bridge
CITATION_TOKENS = 16  # the "[n] path:lines - symbol" line and code fence of each match in the prompt


def count_tokens(text: str) -> int:
    try:
        from localidx.tokens import count
    except Exception:  # noqa: BLE001 - tiktoken missing or its data unreadable: the documented estimate
        return len(text) // 4
    try:
        return count(text)
    except Exception:  # noqa: BLE001
        return len(text) // 4


def _tokens(match: dict) -> int:
    if "_tokens" not in match:
        match["_tokens"] = count_tokens(match.get("text") or "")
    return match["_tokens"]


def _mergeable(match: dict) -> bool:
    return (match.get("kind") not in ("summary", "error") and isinstance(match.get("start_line"), int)
            and isinstance(match.get("end_line"), int) and bool(match.get("path")))


def _side(window: tuple[int, int], match: dict) -> str | None:
    """"left"/"right" when ``match`` touches the window on that side (not nested in it, not around it)."""
    start, end = window
    if start <= match["start_line"] and match["end_line"] <= end:
        return None  # inside
    if match["start_line"] <= start and match["end_line"] >= end:
        return None  # around
    if match["start_line"] > start and match["start_line"] <= end + 1 + MAX_GAP:
        return "right"
    if match["end_line"] < end and match["end_line"] >= start - 1 - MAX_GAP:
        return "left"
    return None


def _join(members: list[dict]) -> str:
    members = sorted(members, key=lambda m: m["start_line"])
    lines: list[str] = []
    last = members[0]["start_line"] - 1
    for m in members:
        text = (m.get("text") or "").split("\n")
        if m["start_line"] <= last:  # overlap: keep the lines already there
            text = text[last - m["start_line"] + 1:]
        else:
            lines.extend([""] * (m["start_line"] - last - 1))
        lines.extend(text)
        last = max(last, m["end_line"])
    return "\n".join(lines)


def auto_merge(matches: list[dict], budget: int) -> tuple[list[dict], dict]:
    """(windows in the original order, {"windowsBefore", "windowsAfter", "tokensBefore", "tokensAfter"})."""
    used: set[str] = set()
    out: list[dict] = []
    tokens_before = sum(_tokens(m) for m in matches)
    for i, seed in enumerate(matches):
        if seed["id"] in used:
            continue
        used.add(seed["id"])
        if not _mergeable(seed):
            out.append(seed)
            continue
        members = [seed]
        window = (seed["start_line"], seed["end_line"])
        tokens = _tokens(seed)
        pool = [m for m in matches[i + 1:]  # every earlier match is used already: it seeded or joined a window
                if m["id"] not in used and m["path"] == seed["path"] and m.get("repo") == seed.get("repo")
                and _mergeable(m)]
        grown = True
        while grown and pool:
            grown = False
            for m in pool:  # best-ranked first: the list's order
                if _side(window, m) and tokens + _tokens(m) <= budget:
                    members.append(m)
                    used.add(m["id"])
                    pool.remove(m)
                    tokens += _tokens(m)
                    window = (min(window[0], m["start_line"]), max(window[1], m["end_line"]))
                    grown = True
                    break
        if len(members) == 1:
            out.append(seed)
            continue
        members.sort(key=lambda m: m["start_line"])
        merged = dict(seed)
        merged["text"] = _join(members)
        merged["start_line"], merged["end_line"] = window
        merged["score"] = max(float(m["score"]) for m in members)
        merged["stale"] = any(m.get("stale") for m in members)
        merged["symbols"] = [s for m in members for s in ([m["symbol"]] if m.get("symbol") else m.get("symbols") or [])]
        merged["auto_merged"] = True
        merged["merged_chunk_ids"] = [m["id"] for m in members]
        merged["merged_chunk_count"] = len(members)
        merged["chunk_span"] = {"start": window[0], "end": window[1]}
        merged["content_length"] = len(merged["text"])
        merged.pop("_tokens", None)
        _tokens(merged)
        out.append(merged)
    stats = {"windowsBefore": len(matches), "windowsAfter": len(out), "tokensBefore": tokens_before,
             "tokensAfter": sum(_tokens(m) for m in out)}
    log.info("Auto-merge: %d -> %d windows", len(matches), len(out))
    return out, stats


def fit_budget(matches: list[dict], max_tokens: int) -> tuple[list[dict], dict]:
    """(the matches that fit ``max_tokens``, {"tokens", "dropped", "truncated"})."""
    kept: list[dict] = []
    used = 0
    truncated = False
    for match in matches:
        cost = _tokens(match) + CITATION_TOKENS
        if used + cost <= max_tokens:
            kept.append(match)
            used += cost
    if not kept and matches:
        first = dict(matches[0])
        first["text"], first["end_line"] = _cut(first, max_tokens - CITATION_TOKENS)
        first["truncated"] = True
        first.pop("_tokens", None)
        kept.append(first)
        used = _tokens(first) + CITATION_TOKENS
        truncated = True
    return kept, {"tokens": used, "dropped": len(matches) - len(kept), "truncated": truncated}


def _cut(match: dict, limit: int) -> tuple[str, int]:
    """The longest head of the match's text (whole lines) within ``limit`` tokens, and its last line number."""
    lines = (match.get("text") or "").split("\n")
    low, high = 0, len(lines)
    while low < high:  # the most lines that fit
        mid = (low + high + 1) // 2
        if count_tokens("\n".join(lines[:mid])) <= limit:
            low = mid
        else:
            high = mid - 1
    keep = max(low, 1) if limit > 0 else 0
    text = "\n".join(lines[:keep])
    if keep == 1 and count_tokens(text) > limit:  # one enormous line
        text = text[: max(0, limit) * 4]
    start = match.get("start_line") or 1
    return text, start + max(keep, 1) - 1
