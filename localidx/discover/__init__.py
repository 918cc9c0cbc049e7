"""Finding the files of a repository worth indexing; see ``localidx.discover.files``."""

from localidx.discover.files import (
    SKIP_REASONS,
    Discovery,
    Skipped,
    SourceFile,
    SourceText,
    check_content,
    decode_source,
    discover,
    find_root,
    read_source,
)

__all__ = [
    "SKIP_REASONS",
    "Discovery",
    "Skipped",
    "SourceFile",
    "SourceText",
    "check_content",
    "decode_source",
    "discover",
    "find_root",
    "read_source",
]
