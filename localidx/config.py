"""One Settings object for the whole program.

Precedence, highest first: a CLI flag > a ``LOCALIDX_*`` environment variable > ``.localidx.toml`` at the repository
root > ``[tool.localidx]`` in the root's ``pyproject.toml`` > the user's own ``config.toml``
(``localidx.safety.trust``'s
config dir) > the defaults below. Config files use the field names
(``max_tokens = 384``), or a nested table for dotted names (``[embed] model = "..."``); environment variables are the
upper-cased field name with dots as underscores (``LOCALIDX_MAX_TOKENS``, ``LOCALIDX_EMBED_MODEL``).

Every value is checked where it is read (``RULES``): its type (a file's ``workers = 1.5`` or ``watch = "yes"`` is
refused, an environment variable's text is parsed) and its range. A bad value is a ``ConfigError``: one line naming
the setting, its source and what it may be; nothing is ever rounded, guessed or moved silently.

Trust: a repository's files are its author's, not the user's. A value that could reach the network or a credential,
read or write outside the work tree, or start more processes than there are cores (``RULES``' ``trust``) is taken
from them only when the user trusts the file's exact content (``localidx trust``, recorded by
``localidx.safety.trust``);
otherwise it is left out and reported (``load_settings``' ``ignored``, ``trust_warning``), never an error. The
user's own file, the environment and the flags are the user's, and always taken.
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
from localidx.safety import trust



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
    daemon_max_running: int = 3  # a user's daemons at once; starting one more stops the one idle longest
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
    # `ask`: the model's window in its own tokens (0: ask the server, else assume 4096), the answer's room (0: the
    # profile's maxAnswerTokens), and how long a streamed answer may take to start and may pause.
    llm_context_tokens: int = 0
    llm_answer_tokens: int = 0
    llm_first_token_s: float = 300.0
    llm_idle_s: float = 60.0
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
    # Whether a repository's own file may set it only once the user trusts the file (localidx.safety.trust): True for
    # every
    # value, or value -> bool for some (None: any file may set it).
    trust: object = None
    # A limit that protects the machine (memory, time, disk): an untrusted repository file may only tighten it, to
    # a smaller value ("upper"), or to a smaller non-zero value where 0 means no limit ("upper0").
    limit: str = ""


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TIB = 1 << 40

# Every setting's limits. Numbers outside them, and values of another type, are refused with one line naming the
# setting, where it came from and what it may be: a value localidx would only misread is never taken silently.
# Settings only a client reads (whether to use a daemon; the LLM that `ask` and query rewriting call): a client that
# differs in these alone is served by the running daemon as it is. With ``summarize`` on, the daemon's indexing calls
# the LLM too, and the LLM's settings count.
CLIENT_ONLY = ("daemon", "daemon_max_running", "llm_base_url", "llm_model", "llm_api_key_env", "llm_timeout_s",
               "llm_context_tokens", "llm_answer_tokens", "llm_first_token_s", "llm_idle_s")
DAEMON_CHOICES = ("auto", "running", "never")


def setting_digests(settings: "Settings") -> dict[str, str]:
    """{setting: a short digest of its value} for every setting the daemon's work depends on (``CLIENT_ONLY`` aside
    unless ``summarize`` is on): two of these name the settings in which two processes differ."""
    import hashlib
    import json

    values = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}  # asdict would deep-copy
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


def _over_the_cores(value: int) -> bool:
    return value > (os.cpu_count() or 1)


def _not_shipped_model(value: str) -> bool:
    """A model name other than those shipped in wheels (a fastembed name would be downloaded)."""
    from localidx.embed.names import FAKE_MODEL, STATIC_MODEL, TRANSFORMER_MODEL

    return value.split("[", 1)[0] not in (STATIC_MODEL, TRANSFORMER_MODEL, FAKE_MODEL)


RULES: dict[str, _Rule] = {
    "max_tokens": _Rule(32, 16384),
    "overlap_lines": _Rule(0, 49),
    "merge_tokens": _Rule(0, 16384),  # and never above max_tokens (lowered to it)
    "tiny_tokens": _Rule(0, 16384),
    "window_lines": _Rule(1, 100_000),
    "summary_min_symbols": _Rule(0, 100_000),
    "max_file_bytes": _Rule(1, _TIB, limit="upper"),
    "max_line_chars": _Rule(1, 1_000_000_000, limit="upper"),
    "include_secret_files": _Rule(trust=bool),  # .env files a user keeps in the clone would be read
    "parse_timeout_s": _Rule(0, 3600, limit="upper0"),  # 0: no limit
    "workers": _Rule(0, 1024, trust=_over_the_cores),
    "home": _Rule(trust=bool),  # the index (and the daemon's log) written anywhere
    "embed_model": _Rule(check=bool, allowed="a model name (not empty)", trust=_not_shipped_model),
    "embed_threads": _Rule(0, 1024, trust=_over_the_cores),
    "write_batch_rows": _Rule(1, 10_000_000, limit="upper"),
    "daemon_idle_s": _Rule(0, 365 * 86400, limit="upper0"),  # 0: never
    "daemon_release_s": _Rule(0, 365 * 86400, limit="upper0"),  # 0: never
    "daemon_max_connections": _Rule(1, 1_000_000, limit="upper"),
    "daemon_max_running": _Rule(1, 64, limit="upper"),
    "watch": _Rule(),
    "watch_debounce_s": _Rule(0, 60),
    "daemon": _Rule(check=lambda v: v in DAEMON_CHOICES, allowed='"auto", "running" or "never"'),
    "profile": _Rule(check=bool, allowed="a profile name (not empty)"),
    # The LLM: the network, a credential named by a variable, and the code sent along.
    "llm_base_url": _Rule(check=lambda v: not v or v.startswith(("http://", "https://")),
                          allowed='an http:// or https:// URL, or "" for no LLM', trust=True),
    "llm_model": _Rule(trust=True),
    "llm_api_key_env": _Rule(check=lambda v: not v or bool(_ENV_NAME.match(v)),
                             allowed="the name of an environment variable", trust=True),
    "llm_timeout_s": _Rule(0, 86400, trust=True),  # 0: no limit
    "llm_context_tokens": _Rule(0, 10_000_000, trust=True),  # 0: ask the server
    "llm_answer_tokens": _Rule(0, 1_000_000, trust=True),  # 0: the profile's maxAnswerTokens
    "llm_first_token_s": _Rule(0, 86400, trust=True),  # 0: no limit
    "llm_idle_s": _Rule(0, 86400, trust=True),  # 0: no limit
    "summarize": _Rule(trust=bool),
    "shared_index": _Rule(trust=bool),  # a URI (a path, s3://, gs://, az://) or "" for none
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


MAX_CONFIG_BYTES = 1 << 20  # a config file larger than this is refused unread (a repository can make one any size)


def _refuse_large(path: Path) -> None:
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: {size} bytes, over the {MAX_CONFIG_BYTES} a config file may have; not read")


def read_toml(path: Path) -> dict:
    try:
        _refuse_large(path)
        return tomlfile.load(path)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except tomlfile.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


@dataclass(frozen=True)
class ConfigFile:
    """One table settings are read from: the user's ``config.toml``, a repository's ``[tool.localidx]`` or
    ``.localidx.toml``."""

    source: str  # how messages name it (the trust record's label too): the path, with " [tool.localidx]" for pyproject
    table: dict  # its whole localidx table, [profiles] included
    trusted: bool  # the user's own file, or a repository file whose exact content the user trusts (safety.trust)
    digest: str = ""  # the hash trust records (repository files only)


def user_file() -> ConfigFile | None:
    """The user's own settings (``localidx.safety.trust.user_config_path``), or None when there is no such file."""
    path = trust.user_config_path()
    if not path.is_file():
        return None
    return ConfigFile(str(path), read_toml(path), trusted=True)


def _inside(root: Path, path: Path) -> bool:
    """Whether ``path`` is a regular file that resolves inside ``root`` (a symlink out of the tree is not)."""
    try:
        return path.is_file() and path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        return False


def repository_files(root: Path | None, known: dict | None = None) -> list[ConfigFile]:
    """The repository's config files under ``root``, lowest precedence first: ``[tool.localidx]`` of
    ``pyproject.toml``, then ``.localidx.toml``; each with whether the user trusts its current content. A file that
    is a symlink out of the work tree is not read."""
    if root is None:
        return []
    root = Path(root)
    known = trust.records() if known is None else known
    found = []
    pyproject = root / "pyproject.toml"
    if _inside(root, pyproject):
        tool = read_toml(pyproject).get("tool", {}).get("localidx")
        if isinstance(tool, dict):
            label = f"{pyproject.resolve()} [tool.localidx]"
            digest = trust.digest_table(tool)
            found.append(ConfigFile(label, tool, trust.is_trusted(label, digest, known), digest))
    own = root / ".localidx.toml"
    if _inside(root, own):
        try:
            _refuse_large(own)
            data = own.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read {own}: {exc.strerror}") from None
        try:
            table = tomlfile.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, tomlfile.TOMLDecodeError) as exc:
            raise ConfigError(f"{own}: invalid TOML: {exc}") from None
        label = str(own.resolve())
        digest = trust.digest_bytes(data)
        found.append(ConfigFile(label, table, trust.is_trusted(label, digest, known), digest))
    return found


def config_files(root: Path | None) -> list[ConfigFile]:
    """Every table settings come from under ``root``, lowest precedence first: the user's ``config.toml``, then the
    repository's files (``repository_files``)."""
    own = user_file()
    return ([own] if own is not None else []) + repository_files(root)


def loosens(name: str, value, current) -> bool:
    """Whether ``value`` would loosen the limit ``name`` (``RULES``' ``limit``) from ``current``: a larger value, or
    0 ("no limit") where that is what 0 means. Settings that are not limits loosen nothing."""
    kind = RULES[name].limit
    if kind == "upper0":
        return value == 0 and current != 0 or current != 0 and value > current
    return kind == "upper" and value > current


def needs_trust(name: str, value) -> bool:
    """Whether a repository file may set ``name`` to ``value`` only once the user trusts it (``RULES``' ``trust``)."""
    rule = RULES[name].trust
    return bool(rule(value)) if callable(rule) else bool(rule)


@dataclass(frozen=True)
class Ignored:
    """A value of an untrusted repository file that was not taken."""

    source: str
    name: str  # a setting, or profiles.<name>.generation.template
    value: object = None


# A profile's instructions template: a template of the package by name, or a path inside the repository (which an
# untrusted file may not name: the template's text goes into every prompt, and to the LLM with `ask`).
PACKAGE_TEMPLATE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def untrusted_templates(file: ConfigFile) -> dict[str, object]:
    """{profile name: template} of the profiles whose template an untrusted ``file`` names by something other than a
    package template's name."""
    if file.trusted or not isinstance(file.table.get("profiles"), dict):
        return {}
    out = {}
    for name, table in file.table["profiles"].items():
        generation = table.get("generation") if isinstance(table, dict) else None
        template = generation.get("template") if isinstance(generation, dict) else None
        if template is not None and not (isinstance(template, str) and PACKAGE_TEMPLATE_NAME.match(template)):
            out[name] = template
    return out


def _file_values(files: list[ConfigFile], kinds: dict[str, type], root: Path | None,
                 ignored: list[Ignored]) -> dict:
    values: dict = {}
    defaults = {f.name: f.default for f in fields(Settings)}
    for file in files:
        table = _flatten({k: v for k, v in file.table.items() if k != "profiles"})
        for name, value in table.items():
            if name not in kinds:
                raise ConfigError(f"{file.source}: unknown setting {name!r}")
            if not file.trusted and RULES[name].trust is True:
                ignored.append(Ignored(file.source, name, value))  # not even checked: it is not taken
                continue
            try:
                value = _coerce(name, kinds[name], value, file.source, from_text=False)
            except ConfigError:
                if file.trusted or RULES[name].trust is None:
                    raise
                ignored.append(Ignored(file.source, name, value))  # not taken either way: no error to block on
                continue
            if not file.trusted and (needs_trust(name, value)
                                     or loosens(name, value, values.get(name, defaults.get(name)))):
                ignored.append(Ignored(file.source, name, value))
                continue
            values[name] = value
            if name == "home" and value and root is not None:
                values[name] = str(Path(root, Path(value).expanduser()))
        ignored.extend(Ignored(file.source, f"profiles.{name}.generation.template", template)
                       for name, template in untrusted_templates(file).items())
    return values


def load_settings(root: Path | None = None, overrides: dict | None = None, env: dict | None = None,
                  ignored: list[Ignored] | None = None) -> Settings:
    """Build the Settings for a repository root. ``overrides`` are CLI flags (None values are ignored).

    Every value is checked against ``RULES``: a value of the wrong type or out of range is a ConfigError naming the
    setting, its source (the file, the environment variable or the flag) and what it may be. An environment
    variable set to "" counts as unset for numbers and booleans. A relative ``home`` in a config file is taken
    relative to the repository root (the file's directory), so every directory of the work tree finds one index.

    A value that needs trust (``needs_trust``) in a repository file the user has not trusted is not taken: it is
    appended to ``ignored`` (``trust_warning`` words them for the user), never an error."""
    env = os.environ if env is None else env
    kinds = _kinds()
    values = _file_values(config_files(root), kinds, root, [] if ignored is None else ignored)
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


def restricted_values(file: ConfigFile, root: Path | None) -> dict:
    """{setting: value} of what ``file`` sets that needs trust (``needs_trust``), trusted or not; a profile's
    template path as ``profiles.<name>.generation.template``."""
    kinds = _kinds()
    ignored: list[Ignored] = []
    untrusted_copy = dataclasses.replace(file, trusted=False)
    _file_values([untrusted_copy], kinds, root, ignored)
    return {item.name: item.value for item in ignored}


def _kinds() -> dict[str, type]:
    return {f.name: {"int": int, "float": float, "bool": bool, "str": str}[f.type] for f in fields(Settings)}


def untrusted(root: Path | None) -> list[Ignored]:
    """What the repository's untrusted files set and ``load_settings`` does not take (a ConfigError for a file that
    cannot be read, as ``load_settings`` raises)."""
    kinds = _kinds()
    ignored: list[Ignored] = []
    _file_values([f for f in repository_files(root) if not f.trusted], kinds, root, ignored)
    return ignored


def trust_warning(ignored: list[Ignored], root: Path | None) -> str | None:
    """One line for the user about ``ignored`` values (None when there are none): what was not taken, from which
    file, why, and what to do."""
    if not ignored:
        return None
    by_source: dict[str, list[str]] = {}
    for item in ignored:
        names = by_source.setdefault(item.source, [])
        if item.name not in names:
            names.append(item.name)
    parts = "; ".join(f"{', '.join(names)} from {source}" for source, names in by_source.items())
    where = f" in {root}" if root is not None else ""
    return (f"ignoring {parts}: a repository's own settings may reach the network, credentials, files outside the "
            f"work tree or more processes, or loosen a resource limit, only once you trust the file; read it, then "
            f"run `localidx trust`{where}")


# -- a repository's files, for `localidx trust` ----------------------------------------------------------------


def trust_report(root: Path) -> list[dict]:
    """For each config file of the repository at ``root``: ``file``, ``state`` (trusted, untrusted, or changed: trusted
    once with other content) and ``needs_trust``: {setting: value} of what it sets that only trust lets it set."""
    known = trust.records()
    out = []
    for file in repository_files(root, known):
        state = "trusted" if file.trusted else "changed" if file.source in known else "untrusted"
        out.append({"file": file.source, "state": state, "sha256": file.digest,
                    "needs_trust": restricted_values(file, root)})
    return out


def trust_repository(root: Path) -> list[dict]:
    """Trust the repository's config files as they are now; their report (``trust_report``) after."""
    report = trust_report(root)
    trust.record([(entry["file"], entry["sha256"]) for entry in report])
    return trust_report(root)


def revoke_repository(root: Path) -> list[dict]:
    """End the trust of the repository's config files (also of those changed since); their report after."""
    report = trust_report(root)
    trust.revoke([entry["file"] for entry in report])
    return trust_report(root)
