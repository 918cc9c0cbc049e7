"""TOML, read in one place: ``tomllib`` (Python 3.11+) or its backport ``tomli``, and the package's own data tables.

Place in the flow: the bottom layer, beside errors.py and text.py; the settings (config.py), the language tables,
[META]'s keyword tables, the call-relation tables, the prompts and the cluster manifest all read TOML through it.
"""

from __future__ import annotations

from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

TOMLDecodeError = tomllib.TOMLDecodeError


def loads(text: str) -> dict:
    return tomllib.loads(text)


def load(path: Path | str) -> dict:
    """The TOML file at ``path``; ``OSError`` and ``TOMLDecodeError`` are the caller's to word."""
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def package_table(package: str, name: str) -> dict:
    """A TOML file shipped inside ``package`` (``localidx``'s ``data/keywords.toml``, ...)."""
    return loads(package_text(package, name))


def package_text(package: str, name: str) -> str:
    """The text of a file shipped inside ``package``: read from the package's directory when it is one (importing
    ``importlib.resources`` cost a short command more than reading the file), else through ``importlib.resources``
    (a zipped install)."""
    import sys

    module = sys.modules.get(package)
    origin = getattr(module, "__file__", None)
    if origin:
        try:
            return (Path(origin).parent / name).read_text(encoding="utf-8")
        except OSError:
            pass
    from importlib import resources

    return resources.files(package).joinpath(name).read_text(encoding="utf-8")
