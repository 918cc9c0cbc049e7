"""Auto-merge and the context budget: the last two stages before a pack is served.

Place in the flow: retrieve -> rerank -> expand -> **budget -> merge**. Pure: matches in, matches out.

Budget (``fit_pack``): the budget bounds the whole text a model receives, counted in cl100k on the rendered text
(``measure``, the pipeline's renderer: the instructions template, the question, the excerpts with their citation
lines, the uses / used-by lists and the list of other files). Parts are added in the order of their worth while
the rendered text still fits, each one that does not fit skipped (a smaller later one may still fit):
1. the search's hits, in rank order (the first one cut to whole lines, with a marker, when it alone is over);
2. the other ranked files, a line each (the names of the answers the excerpts leave out);
3. each kept excerpt's ``uses`` and ``used_by`` lists, in rank order;
4. the neighbours expansion added (``expand``), each after its hit.
So the next answer comes before any context around an earlier one. The budget is never exceeded: a budget that
cannot hold the question, the instructions and one line of the best match is a ``UsageError``.

Auto-merge (``auto_merge``), run over what the budget kept: walking the list in order, each match not yet used
seeds a window; the window grows to the left and right by absorbing other matches of the same file whose lines
touch it (at most ``MAX_GAP`` lines apart, or overlapping like the parts of a split symbol) while the window's
tokens stay within its budget. Only whole units join: a part of a split symbol joins only the parts of the same
symbol, so a window never starts or ends inside an unrelated function. A chunk that contains the window or lies
inside it (a class skeleton and one of its methods) is not merged: their texts are different views of the same
lines. No chunk appears twice; a window takes its seed's place. A window of two or more chunks carries
``auto_merged``, ``merged_chunk_ids``, ``merged_chunk_count``, ``chunk_span {start, end}`` and
``content_length``; its text is its chunks' texts in line order, overlap lines once, blank lines for the gaps; its
uses / used-by lists are its members' lists, each line once.

Tokens are counted with tiktoken's cl100k (``localidx.text.tokens``), or ``len(text) // 4`` when that is unavailable.
"""

from __future__ import annotations

import logging
import re
from typing import Callable

from localidx.errors import UsageError

log = logging.getLogger(__name__)

MAX_GAP = 2  # blank lines (or lines of chunks not in the list) a merge may bridge
RELATION_KEYS = ("uses", "used_by")
_SLACK = 8  # tokens a text may lose when rendered among others (a line break merged into the fence line)
_PART = re.compile(r"\(part \d+(?:/\d+)?\)\s*$")


def count_tokens(text: str) -> int:
    try:
        from localidx.text.tokens import count
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


def is_part(match: dict) -> bool:
    """Whether ``match`` is one part of a symbol the chunker split (its title says "(part k/n)")."""
    return bool(_PART.search(match.get("title") or ""))


def _same_symbol(a: dict, b: dict) -> bool:
    return bool(a.get("symbol")) and a.get("symbol") == b.get("symbol") and a.get("kind") == b.get("kind")


def _joins(members: list[dict], match: dict) -> bool:
    """A part of a split symbol joins only a window holding parts of the same symbol; a window of such parts takes
    nothing else. Whole chunks join whole chunks."""
    if is_part(match) or any(is_part(m) for m in members):
        return all(_same_symbol(m, match) for m in members)
    return True


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


def _join_lists(members: list[dict], key: str) -> str:
    lines = [line for m in members for line in (m.get(key) or "").splitlines() if line.strip()]
    return "\n".join(dict.fromkeys(lines))


def auto_merge(matches: list[dict], budget: int) -> tuple[list[dict], dict]:
    """(windows in the original order, {"windowsBefore", "windowsAfter", "tokensBefore", "tokensAfter"})."""
    used: set[str] = set()
    out: list[dict] = []
    tokens_before = sum(_tokens(m) for m in matches)
    for i, seed in enumerate(matches):
        if seed["id"] in used:
            continue
        used.add(seed["id"])
        if not _mergeable(seed) or seed.get("truncated"):
            out.append(seed)
            continue
        members = [seed]
        window = (seed["start_line"], seed["end_line"])
        tokens = _tokens(seed)
        pool = [m for m in matches[i + 1:]  # every earlier match is used already: it seeded or joined a window
                if m["id"] not in used and m["path"] == seed["path"] and m.get("repo") == seed.get("repo")
                and _mergeable(m) and not m.get("truncated")]
        grown = True
        while grown and pool:
            grown = False
            for m in pool:  # best-ranked first: the list's order
                if _side(window, m) and _joins(members, m) and tokens + _tokens(m) <= budget:
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
        for key in RELATION_KEYS:
            if any(key in m for m in members):
                merged[key] = _join_lists(members, key)
        merged.pop("_tokens", None)
        _tokens(merged)
        out.append(merged)
    stats = {"windowsBefore": len(matches), "windowsAfter": len(out), "tokensBefore": tokens_before,
             "tokensAfter": sum(_tokens(m) for m in out)}
    log.info("Auto-merge: %d -> %d windows", len(matches), len(out))
    return out, stats


# -- the budget -------------------------------------------------------------------------------------------------

# measure(matches, files shown) -> the cl100k count of the whole rendered pack with these excerpts (in this order,
# each with the relation lists it carries) and at most that many lines of other files.
Measure = Callable[[list[dict], int], int]


def fit_pack(hits: list[dict], neighbours: list[dict], files: int, measure: Measure,
             budget: int) -> tuple[list[dict], int, dict]:
    """(the excerpts that fit, in reading order; the file lines shown; {"promptTokens", "dropped", "truncated"}).

    ``hits``: the search's matches in rank order, each with its ``uses`` / ``used_by`` lists; ``neighbours``: the
    chunks expansion added, each naming its hit (``neighborOfSpanHash``), in the order they were added; ``files``:
    how many other-file lines the renderer can show at most. ``UsageError`` when the budget cannot hold even one
    line of the best hit."""
    if not hits:
        return [], 0, {"promptTokens": measure([], 0), "dropped": 0, "truncated": False}
    relations = [{key: hit.get(key) or "" for key in RELATION_KEYS} for hit in hits]
    bare = [{k: v for k, v in hit.items() if k not in RELATION_KEYS} for hit in hits]
    kept: list[dict] = []
    truncated = False
    first = bare[0]
    if measure([first], 0) <= budget:
        kept.append(first)
    else:
        kept.append(_cut_to(first, lambda m: measure([m], 0) <= budget, budget))
        truncated = True
    used = measure(kept, 0)
    for hit in bare[1:]:
        # A hit's own text is (about) the least it adds: one whose text alone is over what is left is not rendered.
        if used + _tokens(hit) - _SLACK > budget:
            continue
        tokens = measure(kept + [hit], 0)
        if tokens <= budget:
            kept.append(hit)
            used = tokens

    low, high = 0, files  # the most file lines that fit (the count grows with the lines)
    while low < high:
        mid = (low + high + 1) // 2
        if measure(kept, mid) <= budget:
            low = mid
        else:
            high = mid - 1
    shown = low
    used = measure(kept, shown)

    lists = {hit["id"]: relations[n] for n, hit in enumerate(hits)}
    for i in range(len(kept)):
        for key, text in lists.get(kept[i]["id"], {}).items():
            if not text:
                continue
            if used + count_tokens(text) - _SLACK > budget:
                continue
            trial = dict(kept[i], **{key: text})
            tokens = measure(kept[:i] + [trial] + kept[i + 1:], shown)
            if tokens <= budget:
                kept[i] = trial
                used = tokens

    by_span = {}
    for match in kept:
        if match.get("span_hash"):
            by_span.setdefault((match.get("repo"), match["span_hash"]), match["id"])
    for neighbour in neighbours:
        anchor = neighbour.get("neighborOfSpanHash")
        if (neighbour.get("repo"), anchor) not in by_span:
            continue
        if used + _tokens(neighbour) - _SLACK > budget:
            continue
        hit_id = by_span[(neighbour.get("repo"), anchor)]
        at = max(n for n, m in enumerate(kept) if m["id"] == hit_id or (m.get("neighborOfSpanHash") == anchor
                                                                        and m.get("repo") == neighbour.get("repo"))) + 1
        trial = kept[:at] + [neighbour] + kept[at:]
        tokens = measure(trial, shown)
        if tokens <= budget:
            kept = trial
            used = tokens
    return kept, shown, {"promptTokens": used, "dropped": len(hits) + len(neighbours) - len(kept),
                         "truncated": truncated}


def _cut_to(match: dict, fits: Callable[[dict], bool], budget: int) -> dict:
    """``match`` cut to the most whole lines of its head for which ``fits`` holds (marked ``truncated``, its
    ``end_line`` the last line kept, ``cut_from`` its former last line); ``UsageError`` when not one line fits."""
    lines = (match.get("text") or "").split("\n")

    def head(n: int) -> dict:
        cut = dict(match, text="\n".join(lines[:n]), truncated=True, cut_from=match.get("end_line"))
        cut["end_line"] = (match.get("start_line") or 1) + max(n, 1) - 1
        cut.pop("_tokens", None)
        return cut

    low = _longest(len(lines), lambda n: fits(head(n)))
    if low == 0 and lines and lines[0]:
        return _cut_line(match, lines[0], fits, budget)
    if low == 0:
        raise _too_small(budget)
    return head(low)


def _longest(most: int, fits: Callable[[int], bool]) -> int:
    """The largest n in 0..most for which ``fits(n)`` holds (``fits`` holds for every n below one that does), by
    bisection: 0 when not even 1 fits."""
    low, high = 0, most
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def _cut_line(match: dict, line: str, fits: Callable[[dict], bool], budget: int) -> dict:
    """The head of ``match``'s first line, cut inside it (``cut_in_line``: the renderer says so)."""

    def head(n: int) -> dict:
        cut = dict(match, text=line[:n], truncated=True, cut_from=match.get("end_line"), cut_in_line=True)
        cut["end_line"] = match.get("start_line") or 1
        cut.pop("_tokens", None)
        return cut

    low = _longest(len(line), lambda n: fits(head(n)))
    if low == 0:
        raise _too_small(budget)
    return head(low)


def _too_small(budget: int) -> UsageError:
    return UsageError(f"a token budget of {budget} cannot hold the instructions, the question and one line of the "
                      "best match: give a larger budget")
