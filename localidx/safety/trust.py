"""Trust: which repository config files the user has read and accepted, recorded outside every repository.

Place in the flow: the bottom layer, below ``config.py`` (which asks it, for each ``.localidx.toml`` and
``[tool.localidx]`` table it reads, whether that exact content is trusted).

A cloned repository's settings are the repository author's, not the user's. The settings that can reach the network
or a credential, read or write files outside the work tree, or start more processes than the machine has cores
(``config.RULES``' ``trust`` column) are taken from such a file only once the user has run ``localidx trust`` in it,
which records the file's content hash here, as git's ``safe.directory``, direnv's ``allow`` and VS Code's workspace
trust do. Any change to the file's content ends its trust; ``localidx trust --revoke`` ends it at once.

Where things live: the per-user config dir (``$LOCALIDX_CONFIG_DIR``, else ``platformdirs.user_config_dir``), 0700:

    <config dir>/config.toml     the user's own settings for every repository (``config.py`` reads it)
    <config dir>/trusted.json    {"version": 1, "files": {"<file label>": {"sha256": ..., "trusted_at": ...}}}

A file label is the config file's absolute path, with `` [tool.localidx]`` after a ``pyproject.toml`` (whose
localidx table alone is hashed: a new dependency does not end its trust). ``trusted.json`` is 0600 and replaced
atomically; one that cannot be read trusts nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from localidx import lazylog

log = lazylog.getLogger(__name__)

CONFIG_DIR_ENV = "LOCALIDX_CONFIG_DIR"
USER_CONFIG_NAME = "config.toml"
TRUST_NAME = "trusted.json"
FORMAT_VERSION = 1


def config_dir() -> Path:
    """The per-user config dir: ``$LOCALIDX_CONFIG_DIR``, else the platform's (``~/.config/localidx`` on Linux)."""
    override = os.environ.get(CONFIG_DIR_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("localidx"))


def user_config_path() -> Path:
    """The user's own settings file (read for every repository, trusted as the environment is)."""
    return config_dir() / USER_CONFIG_NAME


def trust_path() -> Path:
    return config_dir() / TRUST_NAME


def digest_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_table(table: dict) -> str:
    """The hash of a TOML table's content (key order and layout aside)."""
    text = json.dumps(table, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def records() -> dict[str, dict]:
    """{file label: {"sha256", "trusted_at"}} of every trusted file; {} when the record cannot be read."""
    path = trust_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        log.warning("cannot read the trust record %s (%s): no repository file is trusted", path, exc)
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {}
    return {label: entry for label, entry in files.items()
            if isinstance(label, str) and isinstance(entry, dict) and isinstance(entry.get("sha256"), str)}


def is_trusted(label: str, digest: str, known: dict[str, dict] | None = None) -> bool:
    """Whether the file ``label`` is trusted with exactly this content."""
    entry = (records() if known is None else known).get(label)
    return entry is not None and entry["sha256"] == digest


def _write(files: dict[str, dict]) -> None:
    from localidx.safety.private import write_private

    data = json.dumps({"version": FORMAT_VERSION, "files": files}, indent=2, sort_keys=True) + "\n"
    # The default dir is localidx's own; a directory $LOCALIDX_CONFIG_DIR names is the user's to set the mode of.
    write_private(trust_path(), data.encode("utf-8"), tighten_dir=not os.environ.get(CONFIG_DIR_ENV))


def record(items: list[tuple[str, str]]) -> None:
    """Trust each (label, digest): the content each file has now."""
    files = records()
    now = time.time()
    for label, digest in items:
        files[label] = {"sha256": digest, "trusted_at": now}
    _write(files)


def revoke(labels: list[str]) -> list[str]:
    """End the trust of these files; the labels that were trusted."""
    files = records()
    gone = [label for label in labels if label in files]
    if gone:
        for label in gone:
            del files[label]
        _write(files)
    return gone

