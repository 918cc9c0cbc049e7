"""Shared fixtures: real git repositories in temp dirs, and the --update-goldens switch."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", help="Rewrite the golden chunk files from the chunker.")


@pytest.fixture
def update_goldens(request) -> bool:
    return request.config.getoption("--update-goldens")


def git(cwd: Path, *args: str) -> str:
    """Run git with a fixed identity, so tests need no global git config."""
    return subprocess.run(
        ["git", "-c", "user.name=localidx-test", "-c", "user.email=test@localidx.invalid", "-c", "init.defaultBranch=main",
         *args],
        cwd=cwd, check=True, capture_output=True, text=True,
    ).stdout


@pytest.fixture
def make_repo(tmp_path):
    """Create a git repository from {relative path: text or bytes} and commit it."""

    def make(files: dict[str, str | bytes], name: str = "repo", commit: bool = True) -> Path:
        root = tmp_path / name
        root.mkdir()
        git(root, "init", "-q")
        for rel, content in files.items():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content, encoding="utf-8")
        if commit and files:
            git(root, "add", "-A")
            git(root, "commit", "-q", "-m", "initial")
        return root

    return make
