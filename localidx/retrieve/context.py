"""The context pipeline: a question -> a context pack an LLM can answer from, inside a token budget.

Place in the flow: retrieve -> rerank / expand / merge -> serve. Read-only: every query of one run reads one
pinned table version per repository.

Stages, in order; each is switchable by the profile and each one that runs is named in ``appliedModules``:
1. ``profile:<name>``      the profile (``profiles``), always named;
2. ``sanitize``, ``guard`` every parameter trimmed, defaulted and clamped, each fix a warning (``guard``);
3. ``query.compression``   a follow-up made standalone from ``conversationContext`` (deterministic, or by the LLM
   when one is configured: ``query.compression:llm``); ``query.translation`` a question that is not English,
   translated by the configured LLM (without one it runs as is, with a warning);
4. ``search:hybrid``       the question's hybrid search; ``multi-query`` sub-queries from identifiers, quoted
   phrases and keywords (``transforms.sub_queries``; ``multi-query:llm`` adds LLM rewrites), merged in sub-query
   order and de-duplicated by content hash, each extra match naming its ``generatedBySubQuery``; only what the
   search counts as found (``guard.found``, the rule ``search`` shows by): nonsense gives ``noResults``;
5. ``rerank:code-aware``   the head of the list (``rerank``);
6. ``neighbors:<STRATEGY>`` neighbour expansion (``expand``): candidates for the room the hits leave;
7. ``context-budget``      the whole rendered pack within ``maxContextTokens`` (``merge.fit_pack``): the hits in
   rank order first, then the other files' names, the hits' ``uses`` / ``used_by`` lists, the neighbours last;
8. ``auto-merge``          adjacent excerpts of a file merged into windows (``merge``), kept only when the merged
   pack still fits.
Every match gets its ``uses`` / ``used_by`` lists (call relations) before the budget, which keeps those that fit.
The response holds the ``augmentedPrompt`` (the question and the numbered context with ``path:start-end``
citations) and the ``instructions`` (a template with ``{{rawQuery}}``, ``{{repoName}}``, ``{{locale}}``,
``{{augmentedPrompt}}``): ``instructions`` is the whole message a model receives, and ``stats.promptTokens``, its
cl100k count, is never over the budget (``stats.budget``). Room for the answer is not taken from the budget:
``localidx ask`` keeps it in the model's window (``answerReserveTokens``).

The response has the same shape everywhere (``localidx context --json``, the socket's ``context/build``, the MCP
tools); ``RESPONSE_KEYS`` lists its members.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import replace
from pathlib import Path

from localidx.errors import NOT_READY_ALL, NOT_READY_ONE, UsageError
from localidx.retrieve import guard as _guard
from localidx.retrieve.profiles import template_text
from localidx.retrieve import transforms

log = logging.getLogger(__name__)

CONTEXT_NOT_FOUND = "CONTEXT_NOT_FOUND"
INDEX_NOT_READY = "INDEX_NOT_READY"
# The warning an INDEX_NOT_READY response carries: what happened and what to do (the CLI prints it as its error).
# A match found only by a sub-query scores 0.85 of its score there, and never more than the question's own lowest
# match: sub-queries add candidates behind the question's (merged in sub-query order), and only the rerank's rules
# may lift one above them. Without that floor the keyword sub-query's BM25-only scores outranked the fused ones and
# cost 2 of 80 eval queries at Recall@1.
SUB_QUERY_SCORE = 0.85
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_INTERNAL = ("_tokens",)

RESPONSE_KEYS = ("matches", "files", "rerankApplied", "augmentedPrompt", "instructions", "contextMissing",
                 "missingTerms", "noResults", "noResultsReason", "appliedModules", "warnings", "profile", "query",
                 "rawQuery", "subQueries", "stats")
QUESTION_CUT = "\n(the rest of the question was cut to fit the token budget)"
FILES_SHOWN = 10  # the response's "files": the search's best files, however few of them the budget kept


class Source:
    """One repository to search: its name (the label of its matches), its opened Index, its root."""

    def __init__(self, name: str, index, root: Path | None = None):
        self.name = name
        self.index = index
        self.root = Path(root) if root is not None else Path(index.paths.root)
        self.table = None


def build_context(sources: list[Source], query, *, profile: str | None = None, max_tokens=None, top_k=None,
                  conversation_context=None, locale: str | None = None, language: str | None = None,
                  path_glob: str | None = None, kind: str | None = None, settings=None,
                  label_repos: bool = False) -> dict:
    """Run the pipeline over ``sources`` and return the response dict (``RESPONSE_KEYS``).

    ``UsageError`` for a request that cannot be served (an empty question, an unknown profile or kind); an index
    that is not ready is an answer (``noResultsReason: INDEX_NOT_READY``), not an error. ``label_repos`` adds each
    match's ``repo`` (always on with more than one source).
    """
    from localidx.retrieve.profiles import get_profile

    clock = _Clock()
    label_repos = label_repos or len(sources) > 1
    root = sources[0].root if len(sources) == 1 else None
    settings = settings or (sources[0].index.settings if sources else None)
    name, table = get_profile(profile or (settings.profile if settings else None), root)
    params = _guard.check(name, table, query, top_k=top_k, max_tokens=max_tokens, conversation=conversation_context,
                          locale=locale, language=language, path_glob=path_glob, kind=kind)
    prof = params.profile
    warnings = list(params.warnings)
    applied = [f"profile:{name}", "sanitize", "guard"]
    raw_query = params.query
    clock.lap("guard")

    question = _transform_query(params, settings, applied, warnings)
    from localidx.retrieve.search import wanted_roles

    roles = wanted_roles(question)  # a report's tests and docs said in passing do not lift test and doc chunks
    analysis = replace(transforms.analyze(question), about_tests="test" in roles, about_docs="doc" in roles)
    clock.lap("transforms")

    repo_name = (sources[0].name if len(sources) == 1 else ", ".join(s.name for s in sources)
                 or "the registered repositories")
    render = Renderer(question, repo_name, raw_query, params.locale,
                      template_text(prof.template, root, warnings), warnings)
    render.fit_question(prof.max_context_tokens // 2)
    from localidx.store.index import pinned

    ready = []
    for source in sources:
        source.table = pinned(source.index)
        if source.table is not None:
            ready.append(source)
    if not ready:
        warnings.append(NOT_READY_ONE if len(sources) <= 1 else NOT_READY_ALL)
        return _response([], params, name, raw_query, question, analysis, [], applied, warnings, render, False,
                         INDEX_NOT_READY, {"budget": prof.max_context_tokens}, clock)

    queries = [question]
    if prof.multi_query and prof.queries > 1:
        queries += transforms.sub_queries(question, analysis, prof.queries - 1)
        queries += _llm_rewrites(question, prof.queries - len(queries), settings, applied, warnings)
    matches = _search_all(ready, queries, params, label_repos)
    from localidx.retrieve.filters import rank_files

    files = rank_files(matches, FILES_SHOWN)
    render.files = files
    applied.append("search:hybrid")
    if len(queries) > 1:
        applied.append("multi-query")
    clock.lap("search")

    if prof.min_score > 0:
        before = len(matches)
        matches = [m for m in matches if m["score"] >= prof.min_score]
        if before != len(matches):
            applied.append("min-score")
    rerank_applied = False
    if prof.rerank and matches:
        from localidx.retrieve.rerank import rerank

        matches = rerank(matches, prof, analysis)
        applied.append("rerank:code-aware")
        rerank_applied = True
    matches = matches[: prof.top_k]
    clock.lap("rerank")

    hits, neighbours = matches, []
    if prof.neighbor_strategy != "OFF" and prof.neighbor_limit > 0 and hits:
        neighbours = [m for m in _expand(ready, hits, prof, label_repos) if m.get("neighborStrategy")]
        applied.append(f"neighbors:{prof.neighbor_strategy}")
    clock.lap("expand")

    _add_relations(ready, hits, label_repos)
    clock.lap("relations")
    from localidx.retrieve.merge import auto_merge, fit_pack

    stats: dict = {"candidates": len(hits) + len(neighbours), "budget": prof.max_context_tokens}
    # The budget bounds the whole rendered text (the instructions around the excerpts included): the best hits
    # first, then the other files' names, their call relations, and the neighbours last (merge.fit_pack).
    matches, shown, fitted = fit_pack(hits, neighbours, len(files), render.measure, prof.max_context_tokens)
    applied.append("context-budget")
    clock.lap("budget")
    if prof.auto_merge and matches:
        merged, merge_stats = auto_merge(matches, prof.merge_tokens)
        if len(merged) < len(matches) and render.measure(merged, shown) <= prof.max_context_tokens:
            matches = merged
            fitted["promptTokens"] = render.measure(merged, shown)
        else:
            merge_stats.update(windowsAfter=len(matches), tokensAfter=merge_stats["tokensBefore"])
        stats.update(merge_stats)
        applied.append("auto-merge")
    clock.lap("merge")
    for match in matches:
        match.setdefault("uses", "")
        match.setdefault("used_by", "")
    stats.update(fitted, tokens=fitted["promptTokens"])
    if fitted["truncated"]:
        warnings.append(f"the best match alone is over the token budget of {prof.max_context_tokens}: "
                        "its text was cut to fit")
    reason = None if matches else CONTEXT_NOT_FOUND
    return _response(matches, params, name, raw_query, question, analysis, queries[1:], applied, warnings,
                     render, rerank_applied, reason, stats, clock, files, shown)


# -- stages ---------------------------------------------------------------------------------------------------


def _transform_query(params, settings, applied: list[str], warnings: list[str]) -> str:
    from localidx import llm

    question = params.query
    use_llm = settings is not None and llm.configured(settings)
    if params.conversation:
        if use_llm:
            try:
                rewritten = llm.standalone_question(settings, question, params.conversation).strip()
                if rewritten:
                    question = rewritten
                    applied.append("query.compression:llm")
            except Exception as exc:  # noqa: BLE001 - an LLM failure falls back to the deterministic rule
                warnings.append(f"query.compression: the LLM failed ({_one_line(exc)}); used the earlier turns' terms")
                use_llm = False
        if "query.compression:llm" not in applied:
            standalone, carried = transforms.standalone(question, params.conversation)
            if carried:
                question = standalone
                applied.append("query.compression")
    analysis = transforms.analyze(question)
    if not analysis.english:
        if use_llm:
            try:
                translated = llm.translate_to_english(settings, question).strip()
                if translated:
                    question = translated
                    applied.append("query.translation")
            except Exception as exc:  # noqa: BLE001
                warnings.append(f"query.translation: the LLM failed ({_one_line(exc)}); searching as is")
        else:
            warnings.append("the question does not look like English and no LLM is configured to translate it "
                            "(llm_base_url); searching as is — the default embedding model reads English only")
    return question


def _llm_rewrites(question: str, count: int, settings, applied: list[str], warnings: list[str]) -> list[str]:
    from localidx import llm

    if count <= 0 or settings is None or not llm.configured(settings):
        return []
    try:
        rewrites = [q.strip() for q in llm.rewrite_queries(settings, question, count) if q and q.strip()]
    except Exception as exc:  # noqa: BLE001
        warnings.append(f"multi-query: the LLM rewrite failed ({_one_line(exc)})")
        return []
    if rewrites:
        applied.append("multi-query:llm")
    return rewrites[:count]


def _search_all(sources: list[Source], queries: list[str], params, label: bool) -> list[dict]:
    from localidx.retrieve.search import FILES_FROM, search_sources

    profile = params.profile
    merged: dict[tuple, dict] = {}
    order: list[tuple] = []
    floor = None  # the question's lowest score: a sub-query's match never starts above it
    # One search over every source, so scores are comparable across repositories (search_sources); as many
    # candidates per source as one repository gets.
    k = profile.top_k * len(sources)
    for position, text in enumerate(queries):
        if position > 0 and not _guard.has_words(text):
            continue
        found: list[dict] = []
        mode = "hybrid" if position == 0 else profile.sub_query_mode
        # The question's own search goes deeper than topK: the response's files view ranks what it found.
        depth = max(k, FILES_FROM) if position == 0 else k
        for name, match in search_sources([(s.name, s.index, s.table) for s in sources], text, k=depth, mode=mode,
                                          language=params.language, path_glob=params.path_glob, kind=params.kind,
                                          fetch=profile.candidates if position == 0 else None):
            if not _guard.found(match):
                continue  # the search's own rule: what it would not show, the pack does not hold
            item = match.to_dict()
            if label:
                item["repo"] = name
            found.append(item)
        for item in found:
            key = (item.get("repo"), item["content_hash"] or item["id"])
            if key in merged:
                # Recorded, not scored: a +0.05 bonus for it lifted chunks that merely share the question's
                # keywords and cost a query at Recall@1 in the eval.
                if position > 0 and "also found by a sub-query" not in merged[key].setdefault("reasons", []):
                    merged[key]["reasons"].append("also found by a sub-query")
                continue
            if position > 0:
                item["score"] *= SUB_QUERY_SCORE
                if floor is not None:
                    item["score"] = min(item["score"], floor)
                item["generatedBySubQuery"] = text
            item.setdefault("reasons", [])
            merged[key] = item
            order.append(key)
        if position == 0 and order:
            floor = min(merged[key]["score"] for key in order[: profile.top_k])
    return [merged[key] for key in order]


def _expand(sources: list[Source], matches: list[dict], profile, label: bool) -> list[dict]:
    from localidx.retrieve.expand import expand
    from localidx.retrieve.filters import Staleness

    if len(sources) == 1:
        source = sources[0]
        out, _added = expand(matches, profile, source.index.store, source.table, Staleness(source.index),
                             _relations(source.index))
        return out
    # Several repositories: each hit is expanded within its own; the added chunks keep their hit's place.
    by_repo = {s.name: s for s in sources}
    out = list(matches)
    for name, source in by_repo.items():
        own = [m for m in out if m.get("repo") == name]
        if not own:
            continue
        expanded, _added = expand(own, profile, source.index.store, source.table, Staleness(source.index),
                                  _relations(source.index))
        new = {m["id"]: m for m in expanded if m["id"] not in {o["id"] for o in own}}
        if not new:
            continue
        rebuilt = []
        for m in out:
            rebuilt.append(m)
            rebuilt.extend(n for n in expanded if n["id"] in new and n.get("neighborOfSpanHash") == m.get("span_hash")
                           and m.get("repo") == name)
        out = rebuilt
    return out


def _relations(index):
    try:
        from localidx.store.relations import Relations
    except ImportError:
        return None
    try:
        return Relations(index.catalog)
    except Exception as exc:  # noqa: BLE001 - an index from before relations existed: expansion without them
        log.warning("call relations unavailable: %s", _one_line(exc))
        return None


def _add_relations(sources: list[Source], matches: list[dict], label: bool) -> None:
    relations = {s.name: _relations(s.index) for s in sources}
    for match in matches:
        rel = relations.get(match.get("repo") or sources[0].name)
        uses = used_by = ""
        if rel is not None:
            ids = match.get("merged_chunk_ids") or [match["id"]]
            try:
                uses = rel.uses_md(ids)  # each callee once, across the parts of a merged match
                used_by = rel.used_by_md(ids)
            except Exception as exc:  # noqa: BLE001
                log.warning("call relations failed for %s: %s", match["id"], _one_line(exc))
        match["uses"] = uses
        match["used_by"] = used_by


# -- the response ---------------------------------------------------------------------------------------------


class Renderer:
    """Renders a pack's text (``augmented_prompt`` inside the instructions template) and counts it: the one place
    the budget is measured on what a model receives."""

    def __init__(self, question: str, repo_name: str, raw_query: str, locale: str, template: str,
                 warnings: list[str]):
        self.question = question
        self.repo_name = repo_name
        self.values = {"rawQuery": raw_query, "repoName": repo_name, "locale": locale}
        self.template = template
        self.warnings = warnings
        self.files: list[dict] = []

    def render(self, matches: list[dict], shown: int, warnings: list[str] | None = None) -> tuple[str, str]:
        """(augmentedPrompt, instructions) for these excerpts and at most ``shown`` lines of other files."""
        prompt = augmented_prompt(self.question, matches, self.repo_name, self.files, shown)
        instructions = render_template(self.template, dict(self.values, augmentedPrompt=prompt),
                                       [] if warnings is None else warnings)
        return prompt, instructions

    def fit_question(self, limit: int) -> None:
        """Cut the question the prompt shows (whole lines, else characters, with a marker and a warning) so that
        the instructions and the question take at most ``limit`` tokens: a pasted report leaves the code room.
        ``UsageError`` when the instructions alone are over."""
        if self.measure([], 0) <= limit:
            return
        whole = self.question
        lines = whole.split("\n")

        def fits(text: str) -> bool:
            self.question = text + QUESTION_CUT
            return self.measure([], 0) <= limit

        low, high = 0, len(lines)
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (mid, high) if fits("\n".join(lines[:mid])) else (low, mid - 1)
        head = "\n".join(lines[:low])
        if low == 0:
            low, high = 0, len(lines[0])
            while low < high:
                mid = (low + high + 1) // 2
                low, high = (mid, high) if fits(lines[0][:mid]) else (low, mid - 1)
            head = lines[0][:low]
        if not head.strip():
            self.question = whole
            raise UsageError(f"a token budget of {limit * 2} cannot hold the instructions and the start of the "
                             "question: give a larger budget")
        self.question = head + QUESTION_CUT
        self.warnings.append(f"the question was cut to its first {len(head)} characters (of {len(whole)}) in the "
                             f"prompt, to leave half of the token budget of {limit * 2} for the code")

    def measure(self, matches: list[dict], shown: int) -> int:
        """The cl100k count of the larger of the two texts (``instructions`` holds the prompt unless a custom
        template leaves it out)."""
        prompt, instructions = self.render(matches, shown)
        # Counted as printed, with the line break after it (``localidx context`` prints the prompt, ``ask`` the
        # instructions): a break may add a token.
        return max(_count(instructions + "\n"), _count(prompt + "\n"))


def _response(matches, params, profile, raw_query, question, analysis, sub_queries, applied, warnings, render,
              rerank_applied, reason, stats, clock, files=(), shown=0) -> dict:
    for match in matches:
        for key in _INTERNAL:
            match.pop(key, None)
    prompt, instructions = render.render(matches, shown, warnings)
    missing = missing_terms(analysis, matches)
    stats = dict(stats, matches=len(matches), promptTokens=max(_count(instructions), _count(prompt)),
                 timingsMs=clock.laps, totalMs=clock.total())
    stats["tokens"] = stats["promptTokens"]
    return {
        "matches": matches,
        "files": list(files),
        "rerankApplied": rerank_applied,
        "augmentedPrompt": prompt,
        "instructions": instructions,
        "contextMissing": not matches or bool(missing),
        "missingTerms": missing,
        "noResults": not matches,
        "noResultsReason": reason,
        "appliedModules": applied,
        "warnings": warnings,
        "profile": profile,
        "query": question,
        "rawQuery": raw_query,
        "subQueries": list(sub_queries),
        "stats": stats,
    }


def citation(match: dict) -> str:
    """``[repo:]path:start-end``, on one line whatever the path holds (``localidx.text.safe.printable``)."""
    from localidx.text.safe import printable

    where = f"{printable(match['path'])}:{match['start_line']}-{match['end_line']}"
    return f"{printable(match['repo'])}:{where}" if match.get("repo") else where


def augmented_prompt(question: str, matches: list[dict], repo_name: str, files=(), shown: int | None = None) -> str:
    """The question and the numbered context, each excerpt under its ``path:start-end`` citation, then at most
    ``shown`` of the other files the search ranked (``file_list``; None: all of them)."""
    from localidx.text.safe import printable

    if not matches:
        return f"Question: {question}\n\nContext: nothing in {repo_name} matched this question."
    parts = [f"Question: {question}", "", f"Context ({len(matches)} excerpts from {repo_name}):"]
    for n, match in enumerate(matches, 1):
        label = match.get("symbol") or ", ".join(match.get("symbols") or []) or match.get("title") or match["kind"]
        notes = [match.get("kind") or "", match.get("language") or ""]
        if match.get("stale"):
            notes.append("stale: changed since indexed")
        if match.get("truncated"):
            notes.append("truncated")
        parts.append("")
        parts.append(f"[{n}] {citation(match)} {printable(label)} ({', '.join(n for n in notes if n)})")
        fence = "````" if "```" in (match.get("text") or "") else "```"
        parts.append(f"{fence}{match.get('language') or ''}")
        parts.append(match.get("text") or "")
        parts.append(fence)
        if match.get("truncated"):
            end = match["end_line"]
            where = f"inside line {end}" if match.get("cut_in_line") else f"after line {end}"
            parts.append(f"(excerpt cut {where} to fit the token budget; it runs to line "
                         f"{match.get('cut_from') or '?'})")
        if match.get("uses"):
            parts.append("Uses:\n" + match["uses"])
        if match.get("used_by"):
            parts.append("Used by:\n" + match["used_by"])
    others = file_list(files, matches, shown)
    if others:
        parts += ["", others]
    return "\n".join(parts)


def file_list(files, matches, limit: int | None = None) -> str:
    """The ranked files (``filters.rank_files``) that no excerpt in ``matches`` comes from, a line each with the
    place of their best match, the first ``limit`` of them (None: all): "" when there are none."""
    from localidx.text.safe import printable

    shown = {(m.get("repo"), m["path"]) for m in matches}
    lines = [f"- {citation(f)} {printable(f['symbol'])}".rstrip() for f in files
             if (f.get("repo"), f["path"]) not in shown][:limit]
    if not lines:
        return ""
    return "\n".join(["Other files that match, best first (not excerpted):", *lines])


def render_template(text: str, values: dict, warnings: list[str]) -> str:
    """Fill ``{{name}}`` placeholders; unknown ones are removed, each with a warning."""

    def fill(match: re.Match) -> str:
        name = match.group(1)
        if name in values:
            return str(values[name])
        warnings.append(f"instructions template: unknown placeholder {{{{{name}}}}} removed")
        return ""

    return _PLACEHOLDER.sub(fill, text)


def missing_terms(analysis: transforms.Analysis, matches: list[dict]) -> list[str]:
    """Identifiers the question names that no match's text or symbol contains."""
    if not analysis.identifiers:
        return []
    haystack = "\n".join((m.get("text") or "") + "\n" + (m.get("symbol") or "") for m in matches).lower()
    missing = []
    for ident in analysis.identifiers:
        last = transforms.last_component(ident).lower()
        if last and last not in haystack:
            missing.append(ident)
    return missing


def _count(text: str) -> int:
    """A whole pack's cl100k tokens (``tokens.count_once``: packs are large and seen once); when tiktoken cannot be
    loaded, its UTF-8 bytes, a bound from above (every token is at least a byte), so the budget still holds."""
    try:
        from localidx.text.tokens import count_once

        return count_once(text)
    except Exception:  # noqa: BLE001 - tiktoken missing or its data unreadable
        return len(text.encode("utf-8", "surrogatepass"))


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _Clock:
    def __init__(self):
        self.start = self.last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round((now - self.last) * 1000, 1)
        self.last = now

    def total(self) -> float:
        return round((time.perf_counter() - self.start) * 1000, 1)


# -- entry points -----------------------------------------------------------------------------------------------


def build_for_repository(index, query, **options) -> dict:
    """``build_context`` for one opened work tree (what the daemon and the CLI run)."""
    from localidx.store.index import reading

    root = Path(index.paths.root)
    return reading(index, lambda: build_context([Source(root.name, index, root)], query, **options))


def build_context_all_repos(query, *, profile=None, conversation_context=None, settings=None, language=None,
                            path_glob=None, kind=None, max_tokens=None, top_k=None, locale=None) -> dict:
    """``build_context`` over every repository in the per-user registry, each match labelled with its ``repo``, and
    over the shared org index when ``settings.shared_index`` names one (``localidx.retrieve.shared_index``: the org
    repositories this machine indexes itself are left out; each match says its ``index``, ``local`` or ``shared``)."""
    from localidx.index.registry import open_all
    from localidx.retrieve.shared_index import shared_sources

    opened, problems = open_all()
    views, shared_problems = shared_sources(query, settings, [index for _name, index in opened], language=language,
                                            path_glob=path_glob, kind=kind)
    try:
        sources = [Source(name, index) for name, index in opened] + [Source(name, view) for name, view in views]
        response = build_context(sources, query, profile=profile, conversation_context=conversation_context,
                                 settings=settings, language=language, path_glob=path_glob, kind=kind,
                                 max_tokens=max_tokens, top_k=top_k, locale=locale, label_repos=True)
    finally:
        for _name, index in opened + views:
            index.close()
    shared_names = {name for name, _view in views}
    for match in response["matches"]:
        match["index"] = "shared" if match.get("repo") in shared_names else "local"
    response["warnings"][:0] = problems + shared_problems
    return response
