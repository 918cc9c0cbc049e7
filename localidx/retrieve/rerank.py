"""Code-aware rerank of the head of a match list.

Place in the flow: retrieve -> **rerank** -> expand -> merge -> budget. Pure: matches in, matches out.

Only the head is reordered: ``ceil(rerankTopN * headMultiplier)`` matches. Each one's score is adjusted by rules
a code reader would apply, and each applied rule is written into the match's ``reasons`` so the order can be
explained:
- test code x ``testFactor`` (0.5, as osgrep and grepai weight tests) unless the question is about tests;
- paths under ``denyPrefixes`` (generated/, vendor/, dist/, ...) x ``pathFactor`` unless under ``allowPrefixes``;
- ``kindBonus[kind]`` (functions and methods over file summaries and line windows);
- ``languageBonus`` when the match is in a language the question names;
- ``symbolBonus`` when the match defines an identifier the question names.
A name query's definitions (``definition``, set by search) stay ahead of the rest. Then the diversity caps: at most ``maxPerFile`` matches per file and ``maxPerSymbol`` per symbol stay in the head;
the rest move behind it, in their order. The tail keeps its order.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from localidx.retrieve.transforms import Analysis, is_test_path, last_component

if TYPE_CHECKING:
    from localidx.retrieve.profiles import Profile


def head_size(profile: Profile) -> int:
    """How many matches the rerank reorders: ``ceil(rerankTopN * headMultiplier)``."""
    return math.ceil(profile.rerank_top_n * profile.head_multiplier)


def _names(match: dict) -> set[str]:
    """The names a match defines: each symbol as qualified and its last component, as written."""
    names = set()
    for symbol in [match.get("symbol") or "", *(match.get("symbols") or [])]:
        if symbol:
            names.add(symbol)
            names.add(last_component(symbol))
    return names


def wanted_names(analysis: Analysis) -> set[str]:
    """The identifiers a question names, as written and by their last component. Case counts: ``ProgressBar``
    names the class, not a ``progressbar`` function (matching them case-blind cost a query in the eval)."""
    names = set()
    for ident in analysis.identifiers:
        names.add(ident)
        names.add(last_component(ident))
    return {n for n in names if n}


def adjust(match: dict, profile: Profile, analysis: Analysis, wanted: set[str]) -> tuple[float, list[str]]:
    """The match's reranked score and the reasons, one short string per applied rule."""
    score = float(match["score"])
    reasons: list[str] = []
    path = match["path"]
    if not analysis.about_tests and profile.test_factor != 1.0 and is_test_path(path):
        score *= profile.test_factor
        reasons.append(f"test code x{profile.test_factor:g}")
    allowed = any(path.startswith(p) for p in profile.allow_prefixes)
    if not allowed and profile.path_factor != 1.0 and any(
            path.startswith(p) or f"/{p}" in f"/{path}" for p in profile.deny_prefixes):
        score *= profile.path_factor
        reasons.append(f"path penalty x{profile.path_factor:g}")
    bonus = profile.kind_bonus.get(match.get("kind", ""), 0.0)
    if bonus:
        score += bonus
        reasons.append(f"kind {match['kind']} {bonus:+g}")
    if analysis.languages and match.get("language") in analysis.languages and profile.language_bonus:
        score += profile.language_bonus
        reasons.append(f"language {match['language']} {profile.language_bonus:+g}")
    if wanted and profile.symbol_bonus and _names(match) & wanted:
        score += profile.symbol_bonus
        reasons.append(f"defines a named identifier {profile.symbol_bonus:+g}")
    return score, reasons


def rerank(matches: list[dict], profile: Profile, analysis: Analysis) -> list[dict]:
    """The matches with the head reordered (each head match gets ``rerank_score`` and ``reasons``)."""
    size = head_size(profile)
    head, tail = matches[:size], matches[size:]
    wanted = wanted_names(analysis)
    for match in head:
        match["rerank_score"], reasons = adjust(match, profile, analysis, wanted)
        match["reasons"] = [*match.get("reasons", []), *reasons]
    # A name query's definitions stay first (search put them there); the rules order each group.
    head.sort(key=lambda m: (not m.get("definition"), -m["rerank_score"]))  # stable: ties keep the search's order
    kept: list[dict] = []
    moved: list[dict] = []
    per_file: dict[str, int] = {}
    per_symbol: dict[tuple[str, str], int] = {}
    for match in head:
        key = (match["path"], match.get("symbol") or "")
        over_file = per_file.get(match["path"], 0) >= profile.max_per_file
        over_symbol = bool(key[1]) and per_symbol.get(key, 0) >= profile.max_per_symbol
        if over_file or over_symbol:
            match["reasons"].append("diversity cap: moved behind the head")
            moved.append(match)
            continue
        per_file[match["path"]] = per_file.get(match["path"], 0) + 1
        if key[1]:
            per_symbol[key] = per_symbol.get(key, 0) + 1
        kept.append(match)
    return kept + moved + tail
