"""One Settings object for the whole program.

Precedence, highest first: a CLI flag > a ``LOCALIDX_*`` environment variable > ``.localidx.toml`` at the repository
root > ``[tool.localidx]`` in the root's ``pyproject.toml`` > the defaults below. Config files use the field names
(``max_tokens = 384``), or a nested table for dotted names (``[embed] model = "..."``); environment variables are the
upper-cased field name with dots as underscores (``LOCALIDX_MAX_TOKENS``, ``LOCALIDX_EMBED_MODEL``).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, fields
from pathlib import Path

from localidx.errors import ConfigError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


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
    embed_model: str = "sentence-transformers/all-MiniLM-L6-v2"  # "fake" selects the test hasher
    embed_threads: int = 0  # ONNX Runtime threads; 0: its default (every core)
    write_batch_rows: int = 2000  # rows per LanceDB commit while indexing
    # The daemon and its watcher.
    daemon_idle_s: float = 3600.0  # stop after this long without a request or a change; 0: never
    watch: bool = True  # the daemon watches the work tree (else only hooks and requests reach it)
    watch_debounce_s: float = 0.3  # quiet time before a burst of file events becomes one batch
    # Retrieval: the profile `localidx context`, `ask` and the MCP tools use when none is named
    # (profiles are defined in localidx/data/profiles.toml and [profiles.<name>] tables of .localidx.toml).
    profile: str = "balanced"
    # An OpenAI-compatible endpoint (llama.cpp server, Ollama, ...) for `ask`, query translation/compression and the
    # optional summarize stage. Empty: no LLM; nothing else ever needs the network. The key, if the server wants
    # one, comes from the environment variable named by llm_api_key_env.
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


def _coerce(name: str, kind: type, value, source: str):
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(value)
        if kind is int:
            if isinstance(value, bool):
                raise ValueError(value)
            return int(value)
        if kind is float:
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: {name} must be {kind.__name__}, got {value!r}") from None


def _flatten(table: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in table.items():
        name = f"{prefix}{key}".replace("-", "_")
        if isinstance(value, dict):
            out.update(_flatten(value, name + "_"))
        else:
            out[name] = value
    return out


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def config_tables(root: Path | None) -> list[tuple[str, dict]]:
    """The config files that apply under ``root``, lowest precedence first, as (source, their whole localidx
    table): ``[tool.localidx]`` of ``pyproject.toml``, then ``.localidx.toml``."""
    if root is None:
        return []
    found = []
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        tool = _read_toml(pyproject).get("tool", {}).get("localidx")
        if isinstance(tool, dict):
            found.append((f"{pyproject} [tool.localidx]", tool))
    own = root / ".localidx.toml"
    if own.is_file():
        found.append((str(own), _read_toml(own)))
    return found


def file_values(root: Path | None) -> list[tuple[str, dict]]:
    """The settings of ``config_tables``, flattened; ``[profiles.*]`` is left to ``localidx.retrieve.profiles``."""
    return [(source, _flatten({k: v for k, v in table.items() if k != "profiles"}))
            for source, table in config_tables(root)]


def load_settings(root: Path | None = None, overrides: dict | None = None, env: dict | None = None) -> Settings:
    """Build the Settings for a repository root. ``overrides`` are CLI flags (None values are ignored)."""
    env = os.environ if env is None else env
    types = {f.name: f.type for f in fields(Settings)}
    kinds = {name: {"int": int, "float": float, "bool": bool, "str": str}[t] for name, t in types.items()}
    values: dict = {}
    for source, table in file_values(root):
        for name, value in table.items():
            if name not in kinds:
                raise ConfigError(f"{source}: unknown setting {name!r}")
            values[name] = _coerce(name, kinds[name], value, source)
    for name, kind in kinds.items():
        raw = env.get(_env_name(name))
        if raw is not None:
            values[name] = _coerce(name, kind, raw, _env_name(name))
    for name, value in (overrides or {}).items():
        if value is not None:
            values[name] = _coerce(name, kinds[name], value, f"--{name.replace('_', '-')}")
    settings = Settings(**values)
    _validate(settings)
    return settings


def _validate(s: Settings) -> None:
    if s.max_tokens < 32:
        raise ConfigError(f"max_tokens must be at least 32, got {s.max_tokens}")
    if not 0 <= s.overlap_lines < 50:
        raise ConfigError(f"overlap_lines must be between 0 and 49, got {s.overlap_lines}")
    if s.max_file_bytes < 1:
        raise ConfigError(f"max_file_bytes must be positive, got {s.max_file_bytes}")
    if s.merge_tokens > s.max_tokens:
        object.__setattr__(s, "merge_tokens", s.max_tokens)
    if s.workers < 0:
        raise ConfigError(f"workers must be 0 (every core) or more, got {s.workers}")
