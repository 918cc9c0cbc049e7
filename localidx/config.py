"""One Settings object for the whole program.

Precedence, highest first: a CLI flag > a ``LOCALIDX_*`` environment variable > ``.localidx.toml`` at the repository
root > ``[tool.localidx]`` in the root's ``pyproject.toml`` > the defaults below. Config files use the field names
(``max_tokens = 384``), or a nested table for dotted names (``[embed] model = "..."``); environment variables are the
upper-cased field name with dots as underscores (``LOCALIDX_MAX_TOKENS``, ``LOCALIDX_EMBED_MODEL``).

Every value is checked where it is read (``RULES``): its type (a file's ``workers = 1.5`` or ``watch = "yes"`` is
refused, an environment variable's text is parsed) and its range. A bad value is a ``ConfigError``: one line naming
the setting, its source and what it may be; nothing is ever rounded, guessed or moved silently.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path

from localidx.errors import ConfigError
from localidx import tomlfile



@dataclass(frozen=True)
class Settings:
    # Chunking. 384 cl100k tokens: the default model reads 256 word pieces, so it sees the [META] header and the
    # start of a chunk while BM25 sees all of it; larger chunks would only be embedded in part.
    max_tokens: int = 384
    overlap_lines: int = 5
    merge_tokens: int = 192  # tiny adjacent siblings are merged into one chunk up to this size
    tiny_tokens: int = 48  # a symbol under this many tokens counts as tiny
    window_lines: int = 60  # line windows for text files no grammar knows
    summary_min_symbols: int = 5
    # Discovery.
    max_file_bytes: int = 1024 * 1024
    max_line_chars: int = 1000  # a line longer than this, in a file whose lines average over 200 chars: minified
    include_secret_files: bool = False  # index .env*, *.pem, ... (values are still redacted)
    parse_timeout_s: float = 5.0
    # Workers for chunking a whole repository; 0 = every core.
    workers: int = 0
    # Index and embeddings.
    home: str = ""  # the state dir; default: <git common dir>/localidx, or a per-user dir outside git
    embed_model: str = "static-minilm"  # or "sentence-transformers/all-MiniLM-L6-v2" (the transformer); "fake": tests
    embed_threads: int = 0  # ONNX Runtime threads; 0: its default (every core)
    write_batch_rows: int = 2000  # rows per LanceDB commit while indexing
    # The daemon and its watcher.
    daemon_idle_s: float = 3600.0  # stop after this long without a request or a change; 0: never
    daemon_release_s: float = 300.0  # release the model and the index caches after this long without a query; 0: never
    daemon_max_connections: int = 1000  # open connections the daemon serves; more are answered "overloaded"
    watch: bool = True  # the daemon watches the work tree (else only hooks and requests reach it)
    watch_debounce_s: float = 0.3  # quiet time before a burst of file events becomes one batch
    # Whether the CLI's commands go through the work tree's daemon: "auto" (use it, and start it in the background
    # when none runs, except under CI), "running" (use one that runs, start none) or "never" (this process only).
    daemon: str = "auto"
    # Retrieval: the profile `localidx context`, `ask` and the MCP tools use when none is named
    # (profiles are defined in localidx/data/profiles.toml and [profiles.<name>] tables of .localidx.toml).
    profile: str = "balanced"
    # An OpenAI-compatible endpoint (llama.cpp server, Ollama, ...) for `ask`, query translation/compression and the
    # optional explain stage (`summarize`). Empty: no LLM; nothing else ever needs the network. The key, if the server
    # wants one, comes from the environment variable named by llm_api_key_env.
    llm_base_url: str = ""  # e.g. http://127.0.0.1:8080/v1
    llm_model: str = ""
    llm_api_key_env: str = "LOCALIDX_LLM_API_KEY"
    llm_timeout_s: float = 120.0
    summarize: bool = False  # index-time LLM explanation per code chunk (needs llm_base_url)
    # A shared organisation index (`localidx cluster index ... --to URI`) that --all-repos reads beside the registry:
    # a path, s3://, gs://, az://... The URI only: storage credentials come from the environment, never from here.
    shared_index: str = ""

    def replace(self, **changes) -> "Settings":
        return dataclasses.replace(self, **changes)


def _env_name(field_name: str) -> str:
    return "LOCALIDX_" + field_name.upper()


@dataclass(frozen=True)
class _Rule:
    """What one setting may hold: numbers within [low, high]; strings that ``check`` accepts (``allowed`` says
    what that is, in words)."""

    low: float | None = None
    high: float | None = None
    check: object = None  # str -> bool, for strings
    allowed: str = ""


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TIB = 1 << 40

# Every setting's limits. Numbers outside them, and values of another type, are refused with one line naming the
# setting, where it came from and what it may be: a value localidx would only misread is never taken silently.
# Settings only a client reads (whether to use a daemon; the LLM that `ask` and query rewriting call): a client that
# differs in these alone is served by the running daemon as it is. With ``summarize`` on, the daemon's indexing calls
# the LLM too, and the LLM's settings count.
CLIENT_ONLY = ("daemon", "llm_base_url", "llm_model", "llm_api_key_env", "llm_timeout_s")
DAEMON_CHOICES = ("auto", "running", "never")


def setting_digests(settings: "Settings") -> dict[str, str]:
    """{setting: a short digest of its value} for every setting the daemon's work depends on (``CLIENT_ONLY`` aside
    unless ``summarize`` is on): two of these name the settings in which two processes differ."""
    import hashlib
    import json

    values = dataclasses.asdict(settings)
    for name in CLIENT_ONLY:
        if not (settings.summarize and name.startswith("llm_")):
            values.pop(name)
    return {name: hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode("utf-8", "surrogatepass"))
            .hexdigest()[:8] for name, value in sorted(values.items())}


def fingerprint(settings: "Settings") -> str:
    """A digest of the settings the daemon's work depends on (``setting_digests``): the daemon's hello compares it
    with its client's, so a daemon started before ``.localidx.toml`` (or a ``LOCALIDX_*`` variable) changed is
    restarted once, as for another version. Settings only a client reads (``CLIENT_ONLY``) restart nothing."""
    import hashlib
    import json

    values = json.dumps(setting_digests(settings), sort_keys=True)
    return hashlib.sha256(values.encode()).hexdigest()[:16]


def differing_settings(mine: dict, theirs: object) -> list[str]:
    """The names of the settings whose digests differ between ``mine`` and ``theirs`` (``setting_digests``);
    empty when ``theirs`` is not such a dict (a daemon that does not send it)."""
    if not isinstance(theirs, dict):
        return []
    return sorted(name for name in set(mine) | set(theirs) if mine.get(name) != theirs.get(name))


RULES: dict[str, _Rule] = {
    "max_tokens": _Rule(32, 16384),
    "overlap_lines": _Rule(0, 49),
    "merge_tokens": _Rule(0, 16384),  # and never above max_tokens (lowered to it)
    "tiny_tokens": _Rule(0, 16384),
    "window_lines": _Rule(1, 100_000),
    "summary_min_symbols": _Rule(0, 100_000),
    "max_file_bytes": _Rule(1, _TIB),
    "max_line_chars": _Rule(1, 1_000_000_000),
    "include_secret_files": _Rule(),
    "parse_timeout_s": _Rule(0, 3600),  # 0: no limit
    "workers": _Rule(0, 1024),
    "home": _Rule(),
    "embed_model": _Rule(check=bool, allowed="a model name (not empty)"),
    "embed_threads": _Rule(0, 1024),
    "write_batch_rows": _Rule(1, 10_000_000),
    "daemon_idle_s": _Rule(0, 365 * 86400),  # 0: never
    "daemon_release_s": _Rule(0, 365 * 86400),  # 0: never
    "daemon_max_connections": _Rule(1, 1_000_000),
    "watch": _Rule(),
    "watch_debounce_s": _Rule(0, 60),
    "daemon": _Rule(check=lambda v: v in DAEMON_CHOICES, allowed='"auto", "running" or "never"'),
    "profile": _Rule(check=bool, allowed="a profile name (not empty)"),
    "llm_base_url": _Rule(check=lambda v: not v or v.startswith(("http://", "https://")),
                          allowed='an http:// or https:// URL, or "" for no LLM'),
    "llm_model": _Rule(),
    "llm_api_key_env": _Rule(check=lambda v: not v or bool(_ENV_NAME.match(v)),
                             allowed="the name of an environment variable"),
    "llm_timeout_s": _Rule(0, 86400),  # 0: no limit
    "summarize": _Rule(),
    "shared_index": _Rule(),  # a URI (a path, s3://, gs://, az://) or "" for none
}


def _allowed(kind: type, rule: _Rule) -> str:
    if kind is bool:
        return "true or false"
    if kind in (int, float):
        what = "an integer" if kind is int else "a number"
        return f"{what} from {_number(rule.low)} to {_number(rule.high)}"
    return rule.allowed or "a string"


def _number(value: float) -> str:
    return f"{int(value):,}" if value == int(value) else f"{value:g}"


def _coerce(name: str, kind: type, value, source: str, from_text: bool):
    """``value`` as the setting's type, checked against its rule; ConfigError (one line) when it is not one.

    ``from_text``: the value is an environment variable's text (``"1"``, ``"yes"``, ``"0.5"``), else it must already
    have the type (a TOML value or a CLI flag): ``workers = 1.5`` or ``watch = "yes"`` in a file is refused."""
    rule = RULES[name]
    problem = f"{source}: {name} must be {_allowed(kind, rule)}, got {value!r}"
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = value.strip().lower() if from_text and isinstance(value, str) else None
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ConfigError(problem)
    if kind in (int, float):
        number = value
        if from_text and isinstance(value, str):
            try:
                number = int(value.strip()) if kind is int else float(value.strip())
            except ValueError:
                raise ConfigError(problem) from None
        is_number = isinstance(number, int) or (kind is float and isinstance(number, float))
        if isinstance(number, bool) or not is_number or not math.isfinite(number):
            raise ConfigError(problem)
        if not rule.low <= number <= rule.high:
            raise ConfigError(problem)
        return kind(number)
    if not isinstance(value, str) or (rule.check is not None and not rule.check(value)):
        raise ConfigError(problem)
    return value


def _flatten(table: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in table.items():
        name = f"{prefix}{key}".replace("-", "_")
        if isinstance(value, dict):
            out.update(_flatten(value, name + "_"))
        else:
            out[name] = value
    return out


def read_toml(path: Path) -> dict:
    try:
        return tomlfile.load(path)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except tomlfile.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def config_tables(root: Path | None) -> list[tuple[str, dict]]:
    """The config files that apply under ``root``, lowest precedence first, as (source, their whole localidx
    table): ``[tool.localidx]`` of ``pyproject.toml``, then ``.localidx.toml``."""
    if root is None:
        return []
    found = []
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        tool = read_toml(pyproject).get("tool", {}).get("localidx")
        if isinstance(tool, dict):
            found.append((f"{pyproject} [tool.localidx]", tool))
    own = root / ".localidx.toml"
    if own.is_file():
        found.append((str(own), read_toml(own)))
    return found


def file_values(root: Path | None) -> list[tuple[str, dict]]:
    """The settings of ``config_tables``, flattened; ``[profiles.*]`` is left to ``localidx.retrieve.profiles``."""
    return [(source, _flatten({k: v for k, v in table.items() if k != "profiles"}))
            for source, table in config_tables(root)]


def load_settings(root: Path | None = None, overrides: dict | None = None, env: dict | None = None) -> Settings:
    """Build the Settings for a repository root. ``overrides`` are CLI flags (None values are ignored).

    Every value is checked against ``RULES``: a value of the wrong type or out of range is a ConfigError naming the
    setting, its source (the file, the environment variable or the flag) and what it may be. An environment
    variable set to "" counts as unset for numbers and booleans. A relative ``home`` in a config file is taken
    relative to the repository root (the file's directory), so every directory of the work tree finds one index."""
    env = os.environ if env is None else env
    types = {f.name: f.type for f in fields(Settings)}
    kinds = {name: {"int": int, "float": float, "bool": bool, "str": str}[t] for name, t in types.items()}
    values: dict = {}
    for source, table in file_values(root):
        for name, value in table.items():
            if name not in kinds:
                raise ConfigError(f"{source}: unknown setting {name!r}")
            values[name] = _coerce(name, kinds[name], value, source, from_text=False)
            if name == "home" and values[name] and root is not None:
                values[name] = str(Path(root, Path(values[name]).expanduser()))
    for name, kind in kinds.items():
        raw = env.get(_env_name(name))
        if raw is None or (kind is not str and not raw.strip()):
            continue
        values[name] = _coerce(name, kind, raw, _env_name(name), from_text=True)
    for name, value in (overrides or {}).items():
        if value is not None:
            values[name] = _coerce(name, kinds[name], value, f"--{name.replace('_', '-')}", from_text=False)
    settings = Settings(**values)
    if settings.merge_tokens > settings.max_tokens:
        object.__setattr__(settings, "merge_tokens", settings.max_tokens)
    return settings
