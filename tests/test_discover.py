"""Discovery against real git repositories and plain directories built in tmp dirs."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest

from localidx import gitrepo
from localidx.config import Settings
from localidx.discover import SKIP_REASONS, check_content, decode_source, discover, find_root, read_source
from localidx.errors import UsageError
from conftest import git, init_repo as make_repo, write_files as write

DEFAULT = Settings()


@pytest.fixture(autouse=True)
def no_user_git_config(isolated_git_config):
    return isolated_git_config


def listed(d) -> list[str]:
    return [f.path for f in d.files]


def reasons(d) -> dict[str, str]:
    return {s.path: s.reason for s in d.skipped}


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    root = tmp_path / "plain"
    root.mkdir()
    assert find_root(root) == (root.resolve(), False), "tmp dir unexpectedly inside a git work tree"
    return root


def mode_000_is_readable(tmp_path: Path) -> bool:
    """True for root (CAP_DAC_OVERRIDE), which reads a file whatever its mode, so permission tests cannot fail."""
    probe = tmp_path / "probe"
    probe.write_text("p")
    probe.chmod(0)
    try:
        probe.read_text()
        return True
    except PermissionError:
        return False
    finally:
        probe.chmod(0o644)
        probe.unlink()


def png_bytes() -> bytes:
    raw = b"\x00\xff\x00\x00"  # one red pixel, filter byte 0
    ihdr = b"\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00"

    def chunk(kind: bytes, body: bytes) -> bytes:
        return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


# --- what git lists --------------------------------------------------------------------------------------------


def test_git_lists_tracked_and_untracked_but_not_ignored(tmp_path):
    repo = make_repo(
        tmp_path / "r",
        {".gitignore": "build/\n*.log\n", "src/app.py": "print('hi')\n"},
        {"src/new.py": "x = 1\n", "build/out.py": "y = 2\n", "debug.log": "boom\n", "docs/deep/guide.md": "# g\n"},
    )
    d = discover(repo, DEFAULT)
    assert d.in_git is True
    assert d.root == repo.resolve()
    assert listed(d) == [".gitignore", "docs/deep/guide.md", "src/app.py", "src/new.py"]
    assert d.skipped == []
    app = d.files[2]
    assert app.abs_path == repo.resolve() / "src" / "app.py"
    assert app.size == len("print('hi')\n")


def test_find_root_from_subdirectory_and_outside_git(tmp_path, plain):
    repo = make_repo(tmp_path / "r", {"src/pkg/mod.py": "x = 1\n"})
    assert find_root(repo / "src" / "pkg") == (repo.resolve(), True)
    assert find_root(repo / "src" / "pkg" / "mod.py") == (repo.resolve(), True)
    (plain / "a.py").write_text("x\n")
    assert find_root(plain / "a.py") == (plain.resolve(), False)
    with pytest.raises(UsageError, match="no such file"):
        find_root(plain / "missing")


def test_work_tree_found_without_pygit2_agrees_with_pygit2(tmp_path, plain):
    """The plain ``.git`` walk (what a search through a daemon uses) names the root and the shared git dir pygit2
    names: a main work tree, a linked worktree, a submodule; where the files say something unusual it does not
    answer, and pygit2 does."""
    other = make_repo(tmp_path / "other", {"lib.py": "z\n"})
    repo = make_repo(tmp_path / "r", {"src/pkg/mod.py": "x = 1\n"})
    git(repo, "worktree", "add", "-q", str(tmp_path / "linked"))
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(other), "vendored")
    for start in (repo, repo / "src" / "pkg", tmp_path / "linked", repo / "vendored"):
        opened = gitrepo.open_repo(start)
        assert gitrepo.find_work_tree(start) == (gitrepo.work_root(opened), gitrepo.common_dir(opened))
    assert gitrepo.find_work_tree(tmp_path / "linked")[1] == (repo / ".git").resolve()
    assert gitrepo.find_work_tree(plain) is None
    git(repo, "config", "core.worktree", str(tmp_path))  # the work tree is not where .git is: left to pygit2
    assert gitrepo.find_work_tree(repo / "src") is None
    assert find_root(repo / "src") == (tmp_path.resolve(), True)


def test_deleted_tracked_file_not_listed(tmp_path):
    repo = make_repo(tmp_path / "r", {"keep.py": "a\n", "gone.py": "b\n"})
    (repo / "gone.py").unlink()
    d = discover(repo, DEFAULT)
    assert listed(d) == ["keep.py"]
    assert "gone.py" not in reasons(d)


def test_submodule_and_nested_repo_contents_not_listed(tmp_path):
    other = make_repo(tmp_path / "other", {"lib.py": "z\n"})
    repo = make_repo(tmp_path / "r", {"main.py": "m\n"})
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(other), "vendored")
    git(repo, "commit", "-q", "-m", "sub")
    make_repo(repo / "scratch", {"notes.py": "n\n"})  # an untracked repository inside the work tree
    d = discover(repo, DEFAULT)
    assert listed(d) == [".gitmodules", "main.py"]


def test_discover_in_subdirectory_of_repo_is_relative_to_it(tmp_path):
    repo = make_repo(tmp_path / "r", {"top.py": "t\n", "pkg/a.py": "a\n", "pkg/sub/b.py": "b\n"})
    d = discover(repo / "pkg", DEFAULT)
    assert d.in_git is True
    assert listed(d) == ["a.py", "sub/b.py"]
    assert d.files[1].abs_path == (repo / "pkg" / "sub" / "b.py").resolve()


def test_filename_with_quote_space_and_non_ascii(tmp_path):
    repo = make_repo(tmp_path / "r", {"it's a file.py": "q = 1\n", "café.py": "c = 1\n"}, {"new 'one'.py": "n\n"})
    d = discover(repo, DEFAULT)
    assert listed(d) == ["café.py", "it's a file.py", "new 'one'.py"]
    assert read_source(d.files[1].abs_path) == b"q = 1\n"



def test_git_listing_matches_git_ls_files(tmp_path):
    """The listing equals ``git ls-files --cached --others --exclude-standard``, nested negations included
    (libgit2's own ignore check misses those)."""
    repo = make_repo(
        tmp_path / "r",
        {
            ".gitignore": "*.log\nbuild/\n/root_only.txt\n**/vendor/\n",
            "src/app.py": "a\n",
            "build/keep.txt": "tracked although its directory is ignored\n",
        },
        {
            "debug.log": "d\n",
            "sub/.gitignore": "!important.log\n!vendor\n",
            "sub/important.log": "re-included by the nested .gitignore\n",
            "sub/other.log": "o\n",
            "sub/vendor/lib.py": "re-included directory\n",
            "vendor/lib.py": "ignored\n",
            "root_only.txt": "r\n",
            "sub/root_only.txt": "anchored rule applies to the root only\n",
            "build/new.txt": "untracked in an ignored directory\n",
            "excluded.tmp": "x\n",
        },
    )
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("*.tmp\n")
    expected = git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    expected = sorted(p for p in expected if p)
    assert "sub/important.log" in expected and "sub/vendor/lib.py" in expected
    assert gitrepo.listed_files(gitrepo.open_repo(repo)) == expected
    assert listed(discover(repo, DEFAULT)) == expected


def test_global_excludes_file_honoured(tmp_path, no_user_git_config):
    ignore = no_user_git_config / ".config" / "git" / "ignore"
    ignore.parent.mkdir(parents=True)
    ignore.write_text("*.bak\n")
    repo = make_repo(tmp_path / "r", {"a.py": "a\n"}, {"a.py.bak": "old\n", "b.py": "b\n"})
    assert git(repo, "status", "--porcelain", "-uall").split() == ["??", "b.py"]
    assert listed(discover(repo, DEFAULT)) == ["a.py", "b.py"]

# --- ignore files ----------------------------------------------------------------------------------------------


def test_localidxignore_in_git(tmp_path):
    repo = make_repo(
        tmp_path / "r",
        {".localidxignore": "vendor/\n*.snap\n", "vendor/lib.py": "v\n", "app.py": "a\n"},
        {"tests/ui.snap": "s\n"},
    )
    d = discover(repo, DEFAULT)
    assert listed(d) == [".localidxignore", "app.py"]
    assert reasons(d) == {"vendor/lib.py": "localidxignore", "tests/ui.snap": "localidxignore"}


def test_localidxignore_outside_git(plain):
    write(plain, {".localidxignore": "fixtures/\n", "fixtures/big.py": "f\n", "main.py": "m\n"})
    d = discover(plain, DEFAULT)
    assert d.in_git is False
    assert listed(d) == [".localidxignore", "main.py"]
    assert reasons(d) == {"fixtures/big.py": "localidxignore"}


def test_walk_honours_root_and_nested_gitignore(plain):
    write(
        plain,
        {
            ".gitignore": "*.log\nnode_modules/\n/only_root.txt\n",
            "app.py": "a\n",
            "debug.log": "d\n",
            "only_root.txt": "r\n",
            "node_modules/pkg/index.js": "x\n",
            "sub/.gitignore": "!important.log\ncache/\n",
            "sub/important.log": "keep\n",
            "sub/other.log": "drop\n",
            "sub/only_root.txt": "kept: the root rule is anchored\n",
            "sub/cache/c.py": "c\n",
            "sub/code.py": "s\n",
            ".git/config": "[core]\n",  # not a valid repository, but still never walked into
        },
    )
    d = discover(plain, DEFAULT)
    assert d.in_git is False
    assert listed(d) == [
        ".gitignore", "app.py", "sub/.gitignore", "sub/code.py", "sub/important.log", "sub/only_root.txt",
    ]


# --- path-based skips ------------------------------------------------------------------------------------------


def test_too_large_file_skipped_unless_cap_raised(tmp_path):
    repo = make_repo(tmp_path / "r", {"data/table.sql": "x" * (2 * 1024 * 1024), "small.py": "s\n"})
    d = discover(repo, DEFAULT)
    assert listed(d) == ["small.py"]
    assert reasons(d) == {"data/table.sql": "too-large"}
    raised = discover(repo, DEFAULT.replace(max_file_bytes=4 * 1024 * 1024))
    assert listed(raised) == ["data/table.sql", "small.py"]
    assert raised.files[0].size == 2 * 1024 * 1024


def test_lock_files_skipped(tmp_path):
    repo = make_repo(
        tmp_path / "r",
        {"web/package-lock.json": "{}\n", "Cargo.lock": "[[package]]\n", "poetry.lock": "x\n", "go.sum": "m v1\n",
         "package.json": "{}\n", "locking.py": "l\n"},
    )
    d = discover(repo, DEFAULT)
    assert listed(d) == ["locking.py", "package.json"]
    assert reasons(d) == {p: "lock-file" for p in ("Cargo.lock", "go.sum", "poetry.lock", "web/package-lock.json")}


def test_secret_files_skipped_but_templates_and_public_keys_listed(tmp_path):
    files = {
        ".env": "TOKEN=abc\n",
        ".env.local": "TOKEN=def\n",
        ".env.example": "TOKEN=\n",
        "deploy/id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\n",
        "deploy/id_rsa.pub": "ssh-rsa AAAA t@t\n",
        "certs/server.pem": "-----BEGIN CERTIFICATE-----\n",
        "config/credentials.json": "{}\n",
        "env.py": "import os\n",
    }
    repo = make_repo(tmp_path / "r", files)
    d = discover(repo, DEFAULT)
    assert listed(d) == [".env.example", "deploy/id_rsa.pub", "env.py"]
    assert reasons(d) == {
        ".env": "secret-file",
        ".env.local": "secret-file",
        "certs/server.pem": "secret-file",
        "config/credentials.json": "secret-file",
        "deploy/id_rsa": "secret-file",
    }
    opted_in = discover(repo, DEFAULT.replace(include_secret_files=True))
    assert ".env" in listed(opted_in)
    assert "deploy/id_rsa" in listed(opted_in)
    assert opted_in.skipped == []


def test_gitattributes_linguist_generated(tmp_path):
    repo = make_repo(
        tmp_path / "r",
        {
            ".gitattributes": (
                "gen/** linguist-generated\napi/*_pb2.py linguist-generated=true\nsrc/keep.py -linguist-generated\n"
            ),
            "gen/client.ts": "export {}\n",
            "api/user_pb2.py": "x = 1\n",
            "api/user.py": "y = 1\n",
            "src/keep.py": "k = 1\n",
        },
    )
    d = discover(repo, DEFAULT)
    assert listed(d) == [".gitattributes", "api/user.py", "src/keep.py"]
    assert reasons(d) == {"api/user_pb2.py": "generated", "gen/client.ts": "generated"}
    assert reasons(discover(repo, DEFAULT, only=["api"])) == {"api/user_pb2.py": "generated"}


def test_symlinks_inside_listed_outside_skipped(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.py").write_text("s = 1\n")
    repo = make_repo(tmp_path / "r", {"real/mod.py": "m = 1\n"})
    os.symlink(outside / "secret.py", repo / "escape.py")
    os.symlink("real/mod.py", repo / "alias.py")
    os.symlink("real", repo / "realdir")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "links")
    d = discover(repo, DEFAULT)
    assert listed(d) == ["alias.py", "real/mod.py"]
    alias = d.files[0]
    assert alias.abs_path == repo.resolve() / "alias.py"
    assert alias.size == len("m = 1\n")
    assert reasons(d) == {"escape.py": "symlink-outside", "realdir": "not-a-file"}


def test_a_symlink_into_git_is_skipped_with_its_reason(tmp_path):
    """A committed link to .git/config (where credentials such as an extraheader live) is never indexed, and the
    dry run says why."""
    repo = make_repo(tmp_path / "r", {"mod.py": "m = 1\n"})
    git(repo, "config", "http.extraheader", "AUTHORIZATION: basic dXNlcjpwYXNzd29yZDEyMw==")
    os.symlink(".git/config", repo / "leak.txt")
    os.symlink(".git", repo / "gitdir")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "links")
    d = discover(repo, DEFAULT)
    assert listed(d) == ["mod.py"]
    assert reasons(d) == {"leak.txt": "symlink-into-git", "gitdir": "symlink-into-git"}


def test_symlinks_and_fifo_outside_git(tmp_path, plain):
    (tmp_path / "out.py").write_text("o\n")
    write(plain, {"in.py": "i\n"})
    os.symlink(tmp_path / "out.py", plain / "out_link.py")
    os.symlink(plain / "in.py", plain / "in_link.py")
    os.mkfifo(plain / "pipe")
    d = discover(plain, DEFAULT)
    assert listed(d) == ["in.py", "in_link.py"]
    assert reasons(d) == {"out_link.py": "symlink-outside", "pipe": "not-a-file"}


def test_unreadable_file_skipped(tmp_path):
    if mode_000_is_readable(tmp_path):
        pytest.skip("running as root: a mode-000 file is still readable")
    repo = make_repo(tmp_path / "r", {"locked.py": "x\n", "open.py": "y\n"})
    (repo / "locked.py").chmod(0)
    try:
        d = discover(repo, DEFAULT)
    finally:
        (repo / "locked.py").chmod(0o644)
    assert listed(d) == ["open.py"]
    assert reasons(d) == {"locked.py": "unreadable"}


# --- only= -----------------------------------------------------------------------------------------------------


def test_only_restricts_to_paths_and_directories(tmp_path, plain):
    files = {"src/a.py": "a\n", "src/lib/b.py": "b\n", "srcx/c.py": "c\n", "tests/t.py": "t\n", "src/.env": "T=1\n"}
    repo = make_repo(tmp_path / "r", files)
    assert listed(discover(repo, DEFAULT, only=["src/"])) == ["src/a.py", "src/lib/b.py"]
    assert reasons(discover(repo, DEFAULT, only=["src"])) == {"src/.env": "secret-file"}
    assert listed(discover(repo, DEFAULT, only=["tests/t.py", "./srcx"])) == ["srcx/c.py", "tests/t.py"]
    assert listed(discover(repo, DEFAULT, only=[str(repo / "src" / "lib")])) == ["src/lib/b.py"]
    assert len(discover(repo, DEFAULT, only=["."]).files) == 4
    with pytest.raises(UsageError, match="outside the repository"):
        discover(repo, DEFAULT, only=["../elsewhere"])

    write(plain, files)
    assert listed(discover(plain, DEFAULT, only=["src/lib"])) == ["src/lib/b.py"]


# --- content checks --------------------------------------------------------------------------------------------


def test_png_is_binary(tmp_path):
    (tmp_path / "logo.png").write_bytes(png_bytes())
    assert check_content("assets/logo.png", read_source(tmp_path / "logo.png"), DEFAULT) == "binary"


def test_minified_javascript(tmp_path):
    bundle = "var a=1;" + ";".join(f"function f{i}(x){{return x+{i}}}" for i in range(400)) + "\n"
    assert check_content("dist/app.js", bundle.encode(), DEFAULT) == "minified"
    assert check_content("static/vendor.min.js", b"var a = 1;\n", DEFAULT) == "minified"
    assert check_content("static/site.min.css", b"a { color: red }\n", DEFAULT) == "minified"
    # One long literal among ordinary lines is source code, not a minified bundle.
    source = "".join(f"x{i} = {i}\n" for i in range(200)) + "BLOB = '" + "z" * 1500 + "'\n"
    assert check_content("src/data.py", source.encode(), DEFAULT) is None


def test_generated_headers(tmp_path):
    protoc = b"// Code generated by protoc. DO NOT EDIT.\n// source: user.proto\n\npackage user\n"
    assert check_content("api/user.pb.go", protoc, DEFAULT) == "generated"
    assert check_content("Schema.java", b"/*\n * @generated by tool\n */\nclass Schema {}\n", DEFAULT) == "generated"
    assert check_content("m.py", b"# This file is AUTOGENERATED\nx = 1\n", DEFAULT) == "generated"
    late = b"".join(b"line %d\n" % i for i in range(10)) + b"# DO NOT EDIT\n"
    assert check_content("late.py", late, DEFAULT) is None
    assert check_content("ids.py", b"from models import autogenerated_id\n", DEFAULT) is None
    assert check_content("plain.py", b"def f():\n    return 1\n", DEFAULT) is None


def test_skip_reasons_are_the_documented_set():
    assert set(SKIP_REASONS) == {
        "binary", "too-large", "minified", "lock-file", "generated", "secret-file",
        "symlink-outside", "symlink-into-git", "unreadable", "localidxignore", "not-a-file", "undecodable-name",
        "secret-in-path",
        "localidx-state",
    }


# --- reading ---------------------------------------------------------------------------------------------------


def test_read_source_invalid_utf8(tmp_path):
    raw = b"name = '\xff\xfeabc'\nok = 1\n"
    (tmp_path / "latin.py").write_bytes(raw)
    data = read_source(tmp_path / "latin.py")
    assert data == raw
    source = decode_source(data)
    assert source.invalid_utf8 is True
    assert "\ufffd" in source.text
    assert source.text.endswith("ok = 1\n")


def test_read_source_valid_utf8_and_bom(tmp_path):
    (tmp_path / "u.py").write_bytes("\ufeffs = 'héllo'\n".encode())
    data = read_source(tmp_path / "u.py")
    assert data.startswith(b"\xef\xbb\xbf")
    source = decode_source(data)
    assert (source.text, source.invalid_utf8, source.start) == ("s = 'héllo'\n", False, 3)
    assert decode_source(data[3:]).text == source.text


def test_read_source_unreadable_raises_usage_error(tmp_path):
    with pytest.raises(UsageError, match="cannot read") as missing:
        read_source(tmp_path / "missing.py")
    assert "\n" not in str(missing.value)
    with pytest.raises(UsageError, match="cannot read"):
        read_source(tmp_path)
    if mode_000_is_readable(tmp_path):
        pytest.skip("running as root: a mode-000 file is still readable")
    locked = tmp_path / "locked.py"
    locked.write_text("x\n")
    locked.chmod(0)
    try:
        with pytest.raises(UsageError, match="Permission denied"):
            read_source(locked)
    finally:
        locked.chmod(0o644)


# --- gitrepo ---------------------------------------------------------------------------------------------------


def test_blob_ids_match_git(tmp_path):
    repo = make_repo(tmp_path / "r", {"a.py": "a = 1\n", "pkg/b.py": "b = 2\n"})
    ids = gitrepo.blob_ids(gitrepo.open_repo(repo))
    assert ids == {
        "a.py": git(repo, "rev-parse", "HEAD:a.py").strip(),
        "pkg/b.py": git(repo, "rev-parse", "HEAD:pkg/b.py").strip(),
    }


def test_worktree_shares_common_dir(tmp_path):
    repo = make_repo(tmp_path / "r", {"a.py": "a\n"})
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"))
    wt = gitrepo.open_repo(tmp_path / "wt")
    assert gitrepo.work_root(wt) == (tmp_path / "wt").resolve()
    assert gitrepo.common_dir(wt) == (repo / ".git").resolve()
    assert gitrepo.common_dir(gitrepo.open_repo(repo)) == (repo / ".git").resolve()


def test_bare_repo_is_not_a_work_tree(tmp_path):
    bare = tmp_path / "bare.git"
    bare.mkdir()
    git(bare, "init", "-q", "--bare")
    assert gitrepo.open_repo(bare) is None
