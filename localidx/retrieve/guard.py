"""Guard: the one place where every pipeline parameter is sanitised and clamped.

Place in the flow: retrieve (after the profile is chosen, before any search). Pure: no I/O but logging.

Two passes, both reported in the response's ``warnings`` (and logged):
1. The sanitizer trims and normalises what a caller sent (the question, conversation turns, names, case) and fills
   defaults for missing or mistyped profile values.
2. The guard clamps each value to its limits (``LIMITS``); each clamp is also one structured log line
   ``{"event": "guard.clamp", "profile", "field", "requested", "applied"}``.

Limits by default: ``topK <= 40``, ``neighborLimit <= 12`` (and no expansion ever adds more than
``EXPANSION_CAP`` chunks), ``256 <= maxContextTokens <= 4000``, ``queries <= maxQueries <= 6``. The question and
each turn are cut to ``MAX_QUERY_CHARS`` (``limit_query``, which plain search runs too).
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
from localidx.text import valid_text

log = logging.getLogger(__name__)

EXPANSION_CAP = 400  # absolute ceiling on chunks any neighbour expansion may add or read
STRATEGIES = ("OFF", "LINEAR", "PARENT_SYMBOL", "CALL_GRAPH")
SUB_QUERY_MODES = ("bm25", "hybrid")
MAX_QUERY_CHARS = protocol.MAX_QUERY_CHARS  # one limit for every path (defined with the protocol, which documents it)
MAX_TURNS = 6  # conversation turns looked at (the most recent ones)

# field: (section, type, (lowest, highest) or None). Defaults come from the `balanced` profile.
LIMITS: dict[str, tuple[str, type, tuple | None]] = {
    "topK": ("retrieval", int, (1, 40)),
    "candidates": ("retrieval", int, (10, 300)),
    "minScore": ("retrieval", float, (0.0, 1.0)),
    "multiQuery": ("retrieval", bool, None),
    "queries": ("retrieval", int, (1, 6)),
    "maxQueries": ("retrieval", int, (1, 6)),
    "subQueryMode": ("retrieval", str, SUB_QUERY_MODES),
    "rerank": ("postprocess", bool, None),
    "rerankTopN": ("postprocess", int, (1, 40)),
    "headMultiplier": ("postprocess", float, (1.0, 4.0)),
    "languageBonus": ("postprocess", float, (-1.0, 1.0)),
    "symbolBonus": ("postprocess", float, (-1.0, 1.0)),
    "testFactor": ("postprocess", float, (0.0, 1.0)),
    "pathFactor": ("postprocess", float, (0.0, 1.0)),
    "denyPrefixes": ("postprocess", list, (0, 100)),
    "allowPrefixes": ("postprocess", list, (0, 100)),
    "kindBonus": ("postprocess", dict, (-1.0, 1.0)),
    "maxPerFile": ("postprocess", int, (1, 40)),
    "maxPerSymbol": ("postprocess", int, (1, 40)),
    "neighborStrategy": ("postprocess", str, STRATEGIES),
    "neighborRadius": ("postprocess", int, (0, 5)),
    "neighborHits": ("postprocess", int, (0, 10)),
    "neighborLimit": ("postprocess", int, (0, 12)),
    "autoMerge": ("postprocess", bool, None),
    "mergeTokens": ("postprocess", int, (64, 4000)),
    "maxContextTokens": ("postprocess", int, (256, 4000)),
    "answerReserveTokens": ("generation", int, (0, 4000)),
    "maxAnswerTokens": ("generation", int, (16, 8192)),
    "temperature": ("generation", float, (0.0, 2.0)),
    "template": ("generation", str, None),
}


@dataclass
class Params:
    """The checked parameters of one pipeline run: the profile's values by field name, plus the request."""

    profile: str
    query: str
    values: dict
    conversation: list[str] = field(default_factory=list)
    locale: str = "en"
    language: str | None = None
    path_glob: str | None = None
    kind: str | None = None
    warnings: list[str] = field(default_factory=list)

    def __getitem__(self, name: str):
        return self.values[name]


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


def _clean_text(text: str, what: str, warnings: list[str]) -> str:
    valid, fixes = limit_query(text, what)
    warnings.extend(fixes)
    cleaned = _CONTROL.sub(" ", valid)
    if cleaned != text:
        warnings.append(f"sanitize: control characters removed from {what}")
    stripped = cleaned.strip()
    if stripped != cleaned:
        warnings.append(f"sanitize: surrounding whitespace trimmed from {what}")
    return stripped


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


def check(profile_name: str, profile: dict, query, *, top_k=None, max_tokens=None, conversation=None,
          locale=None, language=None, path_glob=None, kind=None) -> Params:
    """Sanitise and clamp one request against its profile; ``UsageError`` for what cannot be fixed (an empty
    question, an unknown kind, a neighbour strategy that does not exist)."""
    warnings: list[str] = []
    if not isinstance(query, str):
        raise UsageError("the question must be a string")
    query = _clean_text(query, "the question", warnings)
    query = re.sub(r"\s+", " ", query)
    if not query:
        raise UsageError("empty question")
    require_words(query, "the question")

    defaults = _balanced_defaults()
    values: dict = {}
    for name, (section, type_, _limits) in LIMITS.items():
        raw = profile.get(section, {}).get(name, defaults[name])
        value = _coerce(name, type_, raw, defaults[name], warnings)
        values[name] = value
    requested = {"topK": top_k, "maxContextTokens": max_tokens}
    for name, value in requested.items():
        if value is not None:
            values[name] = _coerce(name, int, value, values[name], warnings)
    for name, (_section, _kind, limits) in LIMITS.items():
        values[name] = _clamp(profile_name, name, values[name], limits, warnings)
    if values["queries"] > values["maxQueries"]:
        _report(profile_name, "queries", values["queries"], values["maxQueries"], warnings)
        values["queries"] = values["maxQueries"]
    if values["neighborStrategy"] == "OFF":
        values["neighborLimit"] = 0

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
    return Params(profile=profile_name, query=query, values=values, conversation=turns, locale=locale,
                  language=(language or None) and valid_text(language).strip(),
                  path_glob=(path_glob or None) and valid_text(path_glob).strip(), kind=kind or None, warnings=warnings)


@lru_cache(maxsize=1)
def _balanced_defaults() -> dict:
    """The package's ``balanced`` values by field, read once (package data). Shared: ``_clamp`` returns new lists and
    dicts, so no run changes them."""
    from localidx.retrieve.profiles import DEFAULT_PROFILE, load_profiles

    base = load_profiles(None)[DEFAULT_PROFILE]
    return {name: base.get(section, {}).get(name) for name, (section, _kind, _limits) in LIMITS.items()}
