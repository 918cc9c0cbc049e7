"""Guard: the one place where every pipeline parameter is sanitised and clamped.

Place in the flow: retrieve (after the profile is chosen, before any search). Pure: no I/O but logging.

Two passes, both reported in the response's ``warnings`` (and logged):
1. The sanitizer trims and normalises what a caller sent (the question, conversation turns, names, case) and fills
   defaults for missing or mistyped profile values.
2. The guard clamps each value to its limits (``LIMITS``); each clamp is also one structured log line
   ``{"event": "guard.clamp", "profile", "field", "requested", "applied"}``.

Limits by default: ``topK <= 40``, ``neighborLimit <= 12`` (and no expansion ever adds more than
``EXPANSION_CAP`` chunks), ``maxContextTokens <= 128000``, ``queries <= maxQueries <= 6``. A token budget under
``MIN_CONTEXT_TOKENS`` is a ``UsageError``, not raised: a pack is never over the budget asked for. The question and
each turn are cut to ``MAX_QUERY_CHARS`` (``limit_query``, which plain search runs too).

The "no results" rule is ``found``: the one test of whether a search's match counts, which the context pipeline
applies to every search it runs, as ``search`` does to what it shows, so ``search``, ``context``, ``ask`` and every
MCP tool answer nonsense alike (no match, ``noResults``).
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache

from localidx import protocol
from localidx.errors import UsageError
from localidx.retrieve.profiles import DEFAULT_PROFILE, Profile, load_profiles, read_wire, wire_name
from localidx.text.safe import valid_text

log = logging.getLogger(__name__)

EXPANSION_CAP = 400  # absolute ceiling on chunks any neighbour expansion may add or read
STRATEGIES = ("OFF", "LINEAR", "PARENT_SYMBOL", "CALL_GRAPH")
SUB_QUERY_MODES = ("bm25", "hybrid")
MAX_QUERY_CHARS = protocol.MAX_QUERY_CHARS  # one limit for every path (defined with the protocol, which documents it)
MAX_TURNS = 6  # conversation turns looked at (the most recent ones)
# A pack's budget bounds the whole text a model receives (``merge.fit_pack``). Under the smallest one the default
# instructions, a short question and a few lines of code do not fit, so a smaller budget is refused, not raised:
# the pack is never over what was asked for. Above the largest, it is lowered, with a warning.
MIN_CONTEXT_TOKENS = 200
MAX_CONTEXT_TOKENS = 128_000

# Profile field: (type, (lowest, highest) or the allowed values, or None). Defaults come from the `balanced` profile.
# Messages name each field as users write it (``profiles.wire_name``: ``top_k`` is ``topK``).
LIMITS: dict[str, tuple[type, tuple | None]] = {
    "top_k": (int, (1, 40)),
    "candidates": (int, (10, 300)),
    "min_score": (float, (0.0, 1.0)),
    "multi_query": (bool, None),
    "queries": (int, (1, 6)),
    "max_queries": (int, (1, 6)),
    "sub_query_mode": (str, SUB_QUERY_MODES),
    "rerank": (bool, None),
    "rerank_top_n": (int, (1, 40)),
    "head_multiplier": (float, (1.0, 4.0)),
    "language_bonus": (float, (-1.0, 1.0)),
    "symbol_bonus": (float, (-1.0, 1.0)),
    "test_factor": (float, (0.0, 1.0)),
    "path_factor": (float, (0.0, 1.0)),
    "deny_prefixes": (list, (0, 100)),
    "allow_prefixes": (list, (0, 100)),
    "kind_bonus": (dict, (-1.0, 1.0)),
    "max_per_file": (int, (1, 40)),
    "max_per_symbol": (int, (1, 40)),
    "neighbor_strategy": (str, STRATEGIES),
    "neighbor_radius": (int, (0, 5)),
    "neighbor_hits": (int, (0, 10)),
    "neighbor_limit": (int, (0, 12)),
    "auto_merge": (bool, None),
    "merge_tokens": (int, (64, 16000)),
    "max_context_tokens": (int, (MIN_CONTEXT_TOKENS, MAX_CONTEXT_TOKENS)),
    "answer_reserve_tokens": (int, (0, MAX_CONTEXT_TOKENS)),
    "max_answer_tokens": (int, (16, 8192)),
    "temperature": (float, (0.0, 2.0)),
    "template": (str, None),
}


@dataclass
class Params:
    """The checked parameters of one pipeline run: the profile's name and values, plus the request."""

    profile_name: str
    profile: Profile
    query: str
    conversation: list[str] = field(default_factory=list)
    locale: str = "en"
    language: str | None = None
    path_glob: str | None = None
    kind: str | None = None
    warnings: list[str] = field(default_factory=list)


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_LOCALE = re.compile(r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*$")


def limit_query(text: str, what: str = "the query") -> tuple[str, list[str]]:
    """``text`` as valid Unicode and at most ``MAX_QUERY_CHARS`` long, with a warning for each fix. Every path that
    takes query text runs it (search in-process and on the socket, the context pipeline), so a long question gets
    the same cut and the same warning wherever it is sent."""
    warnings: list[str] = []
    valid = valid_text(text)
    if valid is not text:
        warnings.append(f"sanitize: bytes that were not valid text replaced in {what}")
    if len(valid) > MAX_QUERY_CHARS:
        warnings.append(f"sanitize: {what} cut to {MAX_QUERY_CHARS} characters (it had {len(valid)})")
        valid = valid[:MAX_QUERY_CHARS]
    return valid, warnings


_WORD = re.compile(r"\w")


def has_words(text: str) -> bool:
    """Whether ``text`` holds a letter or digit: something to search for."""
    return bool(_WORD.search(text))


def require_words(text: str, what: str = "the query") -> None:
    """UsageError when ``text`` has no letter or digit: nothing BM25 can match and nothing the model can read, so
    any answer would be noise, ranked first with a perfect score."""
    if not has_words(text):
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise UsageError(f"nothing to search for: {what} {shown!r} has no letters or digits")


def found(match) -> bool:
    """Whether a search's match (a ``search.Match`` or its dict) counts as found: a keyword hit, a name's
    definition, a stack frame's chunk, or a similarity at the model's floor (``Match.relevant``, set by the
    search). Nonsense, none of whose words the index holds, finds nothing."""
    relevant = match.get("relevant", True) if isinstance(match, dict) else getattr(match, "relevant", True)
    return bool(relevant)


def _clean_text(text: str, what: str, warnings: list[str]) -> str:
    valid, fixes = limit_query(text, what)
    warnings.extend(fixes)
    cleaned = _CONTROL.sub(" ", valid)
    if cleaned != valid:  # compared after the cut and the repair, which limit_query has reported already
        warnings.append(f"sanitize: control characters removed from {what}")
    stripped = cleaned.strip()
    if stripped != cleaned:
        warnings.append(f"sanitize: surrounding whitespace trimmed from {what}")
    return stripped


def _squeeze_spaces(text: str) -> str:
    """Runs of spaces as one, trailing spaces dropped and at most one blank line in a row, but lines and indentation
    kept as pasted: a report's title line, traceback frames, log lines and code blocks are read line by line
    (``search.plan_query``), so the context pipeline reads a report as ``search`` does."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = (re.sub(r"(?<=\S)[^\S\n]+", " ", line).rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _coerce(name: str, kind: type, value, default, warnings: list[str]):
    """``value`` as ``kind``, or ``default`` with a warning when it cannot be read as one."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "on", "off", "yes", "no", "1", "0"):
            fixed = value.strip().lower() in ("true", "on", "yes", "1")
            warnings.append(f"sanitize: {name} {value!r} read as {str(fixed).lower()}")
            return fixed
    elif kind in (int, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            if kind is int and value != int(value):
                warnings.append(f"sanitize: {name} {value!r} rounded to {round(value)}")
                return int(round(value))
            return kind(value)
        if isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                pass
            else:
                if math.isfinite(number):
                    fixed = int(round(number)) if kind is int else number
                    warnings.append(f"sanitize: {name} {value!r} read as {fixed}")
                    return fixed
    elif kind is str:
        if isinstance(value, str):
            return value.strip()
    elif kind is list:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return [v.strip() for v in value if v.strip()]
    elif kind is dict:
        if isinstance(value, dict):
            good = {k: v for k, v in value.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            if len(good) != len(value):
                warnings.append(f"sanitize: {name} entries that are not numbers were ignored")
            return good
    warnings.append(f"sanitize: {name} {value!r} is not a {kind.__name__}; using {default!r}")
    return default


def _clamp(profile: str, name: str, value, limits, warnings: list[str]):
    if limits is None:
        return value
    applied = value
    if isinstance(limits[0], str):  # an enum
        upper = value.upper() if limits is STRATEGIES else value.lower()
        if upper in limits:
            if upper != value:
                warnings.append(f"sanitize: {name} {value!r} normalised to {upper!r}")
            return upper
        raise UsageError(f"{name} must be one of {', '.join(limits)}, got {value!r} (profile {profile})")
    low, high = limits
    if isinstance(value, (list, dict)):
        if isinstance(value, list):
            applied = value[:high]
        else:
            applied = {k: min(max(v, low), high) for k, v in value.items()}
    else:
        applied = min(max(value, low), high)
    if applied != value:
        _report(profile, name, value, applied, warnings)
    return applied


def _report(profile: str, name: str, requested, applied, warnings: list[str]) -> None:
    log.info(json.dumps({"event": "guard.clamp", "profile": profile, "field": name, "requested": requested,
                            "applied": applied}, default=str))
    warnings.append(f"guard: {name} {requested!r} clamped to {applied!r} (profile {profile})")


def check(profile_name: str, table: dict, query, *, top_k=None, max_tokens=None, conversation=None,
          locale=None, language=None, path_glob=None, kind=None) -> Params:
    """Sanitise and clamp one request against its profile (``table``: the wire form ``profiles.get_profile``
    returns) into a ``Profile``; ``UsageError`` for what cannot be fixed (an empty question, an unknown kind, a
    neighbour strategy that does not exist)."""
    warnings: list[str] = []
    if not isinstance(query, str):
        raise UsageError("the question must be a string")
    query = _clean_text(query, "the question", warnings)
    query = _squeeze_spaces(query)
    if not query:
        raise UsageError("empty question")
    require_words(query, "the question")

    defaults = _balanced_defaults()
    written = read_wire(table)
    values: dict = {}
    for name, (type_, _limits) in LIMITS.items():
        values[name] = _coerce(wire_name(name), type_, written.get(name, defaults[name]), defaults[name], warnings)
    requested = {"top_k": top_k, "max_context_tokens": max_tokens}
    for name, value in requested.items():
        if value is not None:
            values[name] = _coerce(wire_name(name), int, value, values[name], warnings)
    if values["max_context_tokens"] < MIN_CONTEXT_TOKENS:
        raise UsageError(f"a token budget of {values['max_context_tokens']} is too small: a context pack needs at "
                         f"least {MIN_CONTEXT_TOKENS} tokens (the instructions, the question and some code)")
    for name, (_kind, limits) in LIMITS.items():
        values[name] = _clamp(profile_name, wire_name(name), values[name], limits, warnings)
    if values["queries"] > values["max_queries"]:
        _report(profile_name, wire_name("queries"), values["queries"], values["max_queries"], warnings)
        values["queries"] = values["max_queries"]
    if values["neighbor_strategy"] == "OFF":
        values["neighbor_limit"] = 0

    turns = []
    for i, turn in enumerate((conversation or [])[-MAX_TURNS:]):
        if not isinstance(turn, str):
            warnings.append(f"sanitize: conversation turn {i + 1} is not text; dropped")
            continue
        turn, fixes = limit_query(turn, f"conversation turn {i + 1}")
        warnings.extend(fixes)
        text = re.sub(r"\s+", " ", _CONTROL.sub(" ", turn)).strip()
        if text:
            turns.append(text)
        else:
            warnings.append(f"sanitize: empty conversation turn {i + 1} dropped")
    if conversation and len(conversation) > MAX_TURNS:
        warnings.append(f"sanitize: only the last {MAX_TURNS} of {len(conversation)} conversation turns are used")

    locale = (locale or "en").strip() if isinstance(locale, str) else "en"
    if not _LOCALE.match(locale):
        warnings.append(f"sanitize: locale {locale!r} is not a language tag; using 'en'")
        locale = "en"
    if kind:
        from localidx.records import KINDS

        if kind not in KINDS:
            raise UsageError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
    return Params(profile_name=profile_name, profile=Profile(**values), query=query, conversation=turns,
                  locale=locale, language=(language or None) and valid_text(language).strip(),
                  path_glob=(path_glob or None) and valid_text(path_glob).strip(), kind=kind or None, warnings=warnings)


@lru_cache(maxsize=1)
def _balanced_defaults() -> dict:
    """The package's ``balanced`` values by field, as written, read once (package data). Shared: ``_coerce`` returns
    new lists and dicts, so no run changes them."""
    return read_wire(load_profiles(None)[DEFAULT_PROFILE])
