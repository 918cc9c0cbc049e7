"""The manifest of an organisation's repositories, and how a repository is named across machines.

Place in the flow: the first step of ``localidx cluster index`` (before discover). A manifest is TOML::

    [defaults]                     # optional
    ref = "main"

    [[repo]]
    url = "git@github.com:acme/payments.git"    # any URL git clones, or a path to a repository
    name = "payments"                           # optional: the URL's last component
    ref = "v2.4"                                # optional: a branch, a tag or a commit

Invariants:
- Names are unique within a manifest; they are the ``repo`` column of the shared tables.
- A manifest never holds a credential: a URL with a password or token in it is refused (with the URL redacted in the
  message). The manifest is a file in a repository; git's credential helpers, ssh keys and the environment supply
  access instead.
- ``identity(url)`` is how a laptop recognises its own clone of an org repository: the same repository written as
  ``git@host:org/x.git``, ``https://host/org/x`` or ``ssh://git@host/org/x.git`` has one identity, and a local path
  has the identity of its resolved absolute path.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from localidx.errors import UsageError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/]+)@)?(?P<host>[^:/]+):(?P<path>(?!//).+)$")


@dataclass(frozen=True)
class RepoSpec:
    """One repository of the manifest."""

    name: str
    url: str  # as written (already checked to hold no credential), a path made absolute
    ref: str

    @property
    def identity(self) -> str:
        return identity(self.url)


def load_manifest(path: Path) -> list[RepoSpec]:
    """The repositories of the manifest at ``path``; ``UsageError`` (one line) for anything wrong with it."""
    from localidx import tomlfile

    try:
        data = tomlfile.load(path)
    except OSError as exc:
        raise UsageError(f"cannot read the manifest {path}: {exc.strerror or exc}") from None
    except tomlfile.TOMLDecodeError as exc:
        raise UsageError(f"{path}: invalid TOML: {exc}") from None
    unknown = set(data) - {"defaults", "repo"}
    if unknown:
        raise UsageError(f"{path}: unknown table {sorted(unknown)[0]!r} (a manifest has [defaults] and [[repo]])")
    defaults = data.get("defaults", {})
    repos = data.get("repo", [])
    if not isinstance(defaults, dict) or not isinstance(repos, list) or not all(isinstance(r, dict) for r in repos):
        raise UsageError(f"{path}: [defaults] must be a table and [[repo]] an array of tables")
    if not repos:
        raise UsageError(f"{path}: no [[repo]] entries")
    default_ref = str(defaults.get("ref", "HEAD"))
    specs: list[RepoSpec] = []
    seen: set[str] = set()
    for n, item in enumerate(repos, 1):
        unknown = set(item) - {"url", "path", "name", "ref"}
        if unknown:
            raise UsageError(f"{path}: repo #{n}: unknown key {sorted(unknown)[0]!r} (url, path, name, ref)")
        raw = item.get("url") or item.get("path")
        if not isinstance(raw, str) or not raw.strip():
            raise UsageError(f"{path}: repo #{n} has no url (or path)")
        if raw.strip().startswith("-"):
            raise UsageError(f"{path}: repo #{n}: {raw.strip()!r} is not a URL or a path")
        url = _absolute(raw.strip(), path.parent)
        if has_credential(url):
            raise UsageError(f"{path}: repo #{n} ({redact_url(url)}) has a credential in its URL; a manifest is a "
                             f"file in a repository: use a git credential helper, an ssh key or the environment")
        name = str(item.get("name") or default_name(url))
        if not _NAME.match(name):
            raise UsageError(f"{path}: repo #{n}: name {name!r} must be letters, digits, '.', '_', '-' or '/'")
        if name in seen:
            raise UsageError(f"{path}: two repositories are named {name!r}: give one a name")
        seen.add(name)
        ref = str(item.get("ref") or default_ref)
        if ref.startswith("-") or not ref.strip():
            raise UsageError(f"{path}: repo {name}: ref {ref!r} is not a branch, tag or commit")
        specs.append(RepoSpec(name=name, url=url, ref=ref))
    return specs


def _is_remote(url: str) -> bool:
    return "://" in url or bool(_SCP_LIKE.match(url)) and not os.path.exists(url)


def _absolute(url: str, base: Path) -> str:
    if url.startswith("file://"):
        return str(Path(url[len("file://"):]).resolve())
    if _is_remote(url):
        return url
    return str((base / Path(url).expanduser()).resolve())


def default_name(url: str) -> str:
    """``payments`` for ``git@host:acme/payments.git``, ``https://host/acme/payments`` or ``/srv/git/payments``."""
    last = re.split(r"[/:]", url.rstrip("/"))[-1]
    return last[:-4] if last.endswith(".git") else last


def has_credential(url: str) -> bool:
    """Whether a URL carries a password or token (``https://user:TOKEN@host/...``, ``https://TOKEN@host/...``)."""
    if "://" not in url:
        return False
    parts = urlsplit(url)
    if parts.password:
        return True
    # A bare user before @ is a credential over http(s) (a token); over ssh it is the login name (git@...).
    return bool(parts.username) and parts.scheme in ("http", "https")


def redact_url(url: str) -> str:
    """A URL fit for logs and ``status``: no user info, no query string or fragment (where tokens ride)."""
    if "://" not in url:
        match = _SCP_LIKE.match(url)
        return f"{match['host']}:{match['path']}" if match and not os.path.exists(url) else url
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"


def identity(url: str) -> str:
    """The repository's name across machines: ``host/path`` (lower case, no ``.git``) for a remote URL, the resolved
    absolute path for a local one."""
    if url.startswith("file://"):
        url = url[len("file://"):]
    if "://" in url:
        parts = urlsplit(url)
        where = f"{(parts.hostname or '').lower()}/{parts.path.strip('/')}"
    else:
        match = _SCP_LIKE.match(url)
        if match and not os.path.exists(url):
            where = f"{match['host'].lower()}/{match['path'].strip('/')}"
        else:
            return str(Path(url).expanduser().resolve()).rstrip("/")
    where = where[:-4] if where.endswith(".git") else where
    return where.lower().rstrip("/")
