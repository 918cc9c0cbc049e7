"""Profiles: named sets of retrieval, post-processing and generation parameters.

Place in the flow: retrieve (the first stage of the context pipeline, ``localidx.retrieve.context``). Read-only.

The package's defaults live in ``localidx/data/profiles.toml``; the user's ``config.toml`` and a repository add or
override profiles with ``[profiles.<name>]`` tables in ``.localidx.toml`` or ``[tool.localidx.profiles.<name>]`` in
``pyproject.toml`` (the later win: the user's file, then pyproject, then ``.localidx.toml``). Tables merge field by
field; a profile the package does not define starts from ``balanced``. Values are not checked here:
``localidx.retrieve.guard`` sanitises and clamps every one of them.

Instructions templates (``generation.template``) are read by ``template_text`` from two places only: the package's
``data/templates/<name>.md``, or a relative path inside the repository's work tree (no ``..``, no absolute path, no
symlink out of the tree, not under ``.git``). A repository file the user has not trusted (``localidx.safety.trust``) may
name a package template only: its other template values are left out when the profiles are loaded.

Two forms of one profile: the *wire* form is what people write and programs read (tables ``retrieval``,
``postprocess``, ``generation`` of camelCase keys: ``topK``, ``maxContextTokens``), the form ``load_profiles`` and
``get_profile`` return; ``Profile`` is the checked form the pipeline runs on (snake_case attributes). ``Profile``'s
field list is the one place where the two names of a value meet: ``read_wire`` / ``Profile.from_wire`` read the wire
form, ``Profile.to_wire`` writes it, ``wire_name`` names a field as the user wrote it (the guard's warnings do).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from localidx.config import PACKAGE_TEMPLATE_NAME, config_files, read_toml, untrusted_templates
from localidx.errors import UsageError

DEFAULT_PROFILE = "balanced"
SECTIONS = ("retrieval", "postprocess", "generation")
_DATA = Path(__file__).resolve().parent.parent / "data" / "profiles.toml"
TEMPLATES = Path(__file__).resolve().parent.parent / "data" / "templates"
MAX_TEMPLATE_BYTES = 64 * 1024


def _wire(section: str, name: str):
    return field(metadata={"section": section, "wire": name})


@dataclass(frozen=True)
class Profile:
    """The checked values of one profile (``localidx.retrieve.guard.check`` makes them; profiles.toml documents
    each). Immutable: the prefixes are tuples and ``kind_bonus`` a read-only mapping, whatever the caller passed."""

    top_k: int = _wire("retrieval", "topK")
    candidates: int = _wire("retrieval", "candidates")
    min_score: float = _wire("retrieval", "minScore")
    multi_query: bool = _wire("retrieval", "multiQuery")
    queries: int = _wire("retrieval", "queries")
    max_queries: int = _wire("retrieval", "maxQueries")
    sub_query_mode: str = _wire("retrieval", "subQueryMode")
    rerank: bool = _wire("postprocess", "rerank")
    rerank_top_n: int = _wire("postprocess", "rerankTopN")
    head_multiplier: float = _wire("postprocess", "headMultiplier")
    language_bonus: float = _wire("postprocess", "languageBonus")
    symbol_bonus: float = _wire("postprocess", "symbolBonus")
    test_factor: float = _wire("postprocess", "testFactor")
    path_factor: float = _wire("postprocess", "pathFactor")
    deny_prefixes: tuple[str, ...] = _wire("postprocess", "denyPrefixes")
    allow_prefixes: tuple[str, ...] = _wire("postprocess", "allowPrefixes")
    kind_bonus: Mapping[str, float] = _wire("postprocess", "kindBonus")
    max_per_file: int = _wire("postprocess", "maxPerFile")
    max_per_symbol: int = _wire("postprocess", "maxPerSymbol")
    neighbor_strategy: str = _wire("postprocess", "neighborStrategy")
    neighbor_radius: int = _wire("postprocess", "neighborRadius")
    neighbor_hits: int = _wire("postprocess", "neighborHits")
    neighbor_limit: int = _wire("postprocess", "neighborLimit")
    auto_merge: bool = _wire("postprocess", "autoMerge")
    merge_tokens: int = _wire("postprocess", "mergeTokens")
    max_context_tokens: int = _wire("postprocess", "maxContextTokens")
    answer_reserve_tokens: int = _wire("generation", "answerReserveTokens")
    max_answer_tokens: int = _wire("generation", "maxAnswerTokens")
    temperature: float = _wire("generation", "temperature")
    template: str = _wire("generation", "template")

    def __post_init__(self):
        object.__setattr__(self, "deny_prefixes", tuple(self.deny_prefixes))
        object.__setattr__(self, "allow_prefixes", tuple(self.allow_prefixes))
        object.__setattr__(self, "kind_bonus", MappingProxyType(dict(self.kind_bonus)))

    @classmethod
    def from_wire(cls, table: Mapping) -> "Profile":
        """A complete profile table in the wire form, as is (unchecked: ``guard.check`` is what checks); a
        ``TypeError`` names a field the table lacks."""
        return cls(**read_wire(table))

    def to_wire(self) -> dict:
        """The wire form: ``{section: {camelCase key: value}}``, lists and tables as TOML and JSON write them."""
        out: dict[str, dict] = {}
        for name, (section, wire) in WIRE_NAMES.items():
            value = getattr(self, name)
            if isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            out.setdefault(section, {})[wire] = value
        return out


# field name -> (section, wire name), in field order
WIRE_NAMES: dict[str, tuple[str, str]] = {f.name: (f.metadata["section"], f.metadata["wire"]) for f in fields(Profile)}


def wire_name(name: str) -> str:
    """A ``Profile`` field's name as users write it (``top_k`` -> ``topK``)."""
    return WIRE_NAMES[name][1]


def read_wire(table: Mapping) -> dict:
    """``{field name: value as written}`` for each ``Profile`` field a wire-form table sets; no value is checked."""
    out = {}
    for name, (section, wire) in WIRE_NAMES.items():
        part = table.get(section)
        if isinstance(part, Mapping) and wire in part:
            out[name] = part[wire]
    return out


@lru_cache(maxsize=1)
def _package_profiles() -> dict:
    return read_toml(_DATA)


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _repository_profiles(root: Path | None) -> list[tuple[str, dict]]:
    """(source, ``[profiles]`` table) of each config file under ``root``, lowest precedence first; the template paths
    of an untrusted file left out (``config.untrusted_templates``)."""
    out = []
    for file in config_files(root):
        tables = file.table.get("profiles")
        if not isinstance(tables, dict):
            continue
        dropped = untrusted_templates(file)
        if dropped:
            tables = copy.deepcopy(tables)
            for name in dropped:
                del tables[name]["generation"]["template"]
        out.append((f"{file.source} [profiles]", tables))
    return out


def load_profiles(root: Path | None = None) -> dict[str, dict]:
    """Every profile by name: the package's, merged with the repository's (a ``ConfigError`` for unreadable files,
    a ``UsageError`` for a profile table that is not a table)."""
    profiles = {name: _complete(table) for name, table in _package_profiles().items()}  # names are lower case
    for source, tables in _repository_profiles(root):
        for name, table in tables.items():
            name = str(name).strip().lower()
            if not isinstance(table, dict):
                raise UsageError(f"{source}: profiles.{name} must be a table")
            base = profiles.get(name) or profiles[DEFAULT_PROFILE]
            profiles[name] = _merge(base, table)
    return profiles


def _complete(table: dict) -> dict:
    """A package profile with every field: missing ones come from ``balanced``."""
    base = _package_profiles()[DEFAULT_PROFILE]
    return _merge(base, table)


def get_profile(name: str | None, root: Path | None = None) -> tuple[str, dict]:
    """(name, profile) for ``name`` (None: the default); ``UsageError`` naming the known ones when unknown."""
    profiles = load_profiles(root)
    name = (name or DEFAULT_PROFILE).strip().lower()
    if name not in profiles:
        raise UsageError(f"unknown profile {name!r} (known: {', '.join(sorted(profiles))})")
    profile = copy.deepcopy(profiles[name])
    for section in SECTIONS:
        if not isinstance(profile.get(section), dict):
            profile[section] = {}
    return name, profile


def template_text(name: str, root: Path | None, warnings: list[str]) -> str:
    """The text of the instructions template ``name``: a package template by name, or a relative path inside the
    work tree at ``root`` (see the module docstring). Anything else, or a file that cannot be read, is the default
    template, with a warning in ``warnings``."""
    if PACKAGE_TEMPLATE_NAME.match(name) and (TEMPLATES / f"{name}.md").is_file():
        return (TEMPLATES / f"{name}.md").read_text(encoding="utf-8")
    problem = "not found"
    if root is not None and not PACKAGE_TEMPLATE_NAME.match(name):
        problem, text = _repository_template(name, Path(root))
        if text is not None:
            return text
    warnings.append(f"instructions template {name!r} {problem}; using the default")
    return (TEMPLATES / "default.md").read_text(encoding="utf-8")


def _repository_template(name: str, root: Path) -> tuple[str, str | None]:
    """(why not, None) or ("", the text) for a template path inside the work tree."""
    relative = name.replace("\\", "/")
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    if relative.startswith("/") or os.path.isabs(name) or ".." in parts or not parts:
        return "is not a path inside the repository", None
    if parts[0] == ".git":
        return "is not a path inside the repository", None
    top = root.resolve()
    path = top.joinpath(*parts)
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return "not found", None
    if not resolved.is_relative_to(top) or ".git" in resolved.relative_to(top).parts:
        return "leads out of the repository (a symlink)", None
    try:
        fd = os.open(resolved, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return "cannot be read", None
    with os.fdopen(fd, "rb") as fh:
        import stat

        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return "is not a regular file", None
        data = fh.read(MAX_TEMPLATE_BYTES + 1)
    if len(data) > MAX_TEMPLATE_BYTES:
        return f"is over {MAX_TEMPLATE_BYTES // 1024} KB", None
    return "", data.decode("utf-8", errors="replace")
