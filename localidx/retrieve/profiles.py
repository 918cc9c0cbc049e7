"""Profiles: named sets of retrieval, post-processing and generation parameters.

Place in the flow: retrieve (the first stage of the context pipeline, ``localidx.retrieve.context``). Read-only.

The package's defaults live in ``localidx/data/profiles.toml``; a repository adds or overrides profiles with
``[profiles.<name>]`` tables in ``.localidx.toml`` or ``[tool.localidx.profiles.<name>]`` in ``pyproject.toml``
(those win, in that order). Tables merge field by field; a profile the package does not define starts from
``balanced``. Values are not checked here: ``localidx.retrieve.guard`` sanitises and clamps every one of them.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path

from localidx.config import read_toml, config_tables
from localidx.errors import UsageError

DEFAULT_PROFILE = "balanced"
SECTIONS = ("retrieval", "postprocess", "generation")
_DATA = Path(__file__).resolve().parent.parent / "data" / "profiles.toml"


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
    """(source, ``[profiles]`` table) of each config file under ``root``, lowest precedence first."""
    return [(f"{source} [profiles]", table["profiles"]) for source, table in config_tables(root)
            if isinstance(table.get("profiles"), dict)]


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
