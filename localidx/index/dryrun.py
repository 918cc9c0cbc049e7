"""The dry run: discover and chunk every file as indexing would, count what came out, write nothing.

Place in the flow: discover -> workers (chunk) -> this report; no store. ``localidx index --dry-run`` prints it.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from localidx.config import Settings


@dataclass
class DryRunReport:
    root: str
    in_git: bool
    files_processed: int = 0
    files_skipped: int = 0
    skipped_by_reason: dict = field(default_factory=dict)
    skipped_files: list = field(default_factory=list)  # [{"path", "reason"}]
    chunks: int = 0
    chunks_by_kind: dict = field(default_factory=dict)
    chunks_by_language: dict = field(default_factory=dict)
    symbols: int = 0
    bytes: int = 0
    errors: list = field(default_factory=list)  # [{"path", "reason"}]
    invalid_utf8_files: list = field(default_factory=list)
    redactions: int = 0
    duration_s: float = 0.0
    files_per_s: float = 0.0
    mb_per_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def dry_run(root: Path, settings: Settings, only: list[str] | None = None, include_kinds: set[str] | None = None,
            limit_files: int | None = None) -> DryRunReport:
    """Walk the repository and chunk every file as indexing would, writing nothing."""
    from localidx.discover import discover
    from localidx.index.workers import count_file, crashed_count, map_files, worker_count

    started = time.perf_counter()
    found = discover(root, settings, only=only)
    files = found.files[:limit_files] if limit_files is not None else found.files
    report = DryRunReport(root=str(found.root), in_git=found.in_git)
    skipped = [(s.path, s.reason) for s in found.skipped]
    kinds = frozenset(include_kinds) if include_kinds else None
    jobs = [(f.path, str(f.abs_path), settings, kinds) for f in files]
    by_kind: Counter = Counter()
    by_language: Counter = Counter()
    for counts in map_files(count_file, jobs, worker_count(settings), crashed_count):
        if counts.skipped:
            skipped.append((counts.path, counts.skipped))
            continue
        report.files_processed += 1
        report.bytes += counts.size
        report.symbols += counts.symbols
        report.redactions += counts.redactions
        by_kind.update(counts.chunks_by_kind)
        by_language[counts.language] += sum(counts.chunks_by_kind.values())
        report.errors.extend({"path": counts.path, "reason": r} for r in counts.errors)
        if counts.invalid_utf8:
            report.invalid_utf8_files.append(counts.path)
    report.files_skipped = len(skipped)
    report.skipped_files = [{"path": p, "reason": r} for p, r in sorted(skipped)]
    report.skipped_by_reason = dict(Counter(r for _p, r in skipped).most_common())
    report.chunks_by_kind = dict(by_kind.most_common())
    report.chunks_by_language = dict(by_language.most_common())
    report.chunks = sum(by_kind.values())
    report.duration_s = round(time.perf_counter() - started, 3)
    elapsed = max(report.duration_s, 1e-9)
    report.files_per_s = round(report.files_processed / elapsed, 1)
    report.mb_per_s = round(report.bytes / 1e6 / elapsed, 2)
    return report
