"""retrieve/ranking: how a short question and a bare name are ranked, over real git repositories and a real LanceDB
index (fake embedder).

What a user would notice: the file named for what is asked comes first, a name's home file and its class (not its
constructor) come first, a documentation page or a build file does not come before the code for a code question,
a sentence copied from a doc comment finds the function it documents, a name written as code in a question lifts
its definition, and a name declared in a language no parser reads is still found as a definition. Each test names
the rule it checks and, where the rule is a weight, shows the order is different without it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from localidx.config import load_settings
from localidx.index.indexer import run_index
from localidx.retrieve import search
import localidx.retrieve.docheads as docheads
import localidx.retrieve.ranking as ranking
from localidx.store.index import open_index

PAD = "".join(f"    step_{n} = prepare(value, {n})\n" for n in range(12))
NOISE_PAD = PAD[: PAD.index("    step_8")]


def _noise() -> dict[str, str]:
    """Files that match a little of everything, so that a score's scale is a real repository's, not two files'."""
    return {f"misc/noise{n}.py": f"def helper_{n}(value):\n    \"\"\"Return the value {n} when asked.\"\"\"\n{NOISE_PAD}"
            f"    return value\n" for n in range(6)}


def _index(make_repo, tmp_path: Path, files: dict[str, str], name: str = "repo"):
    root = make_repo(files, name=name)
    settings = load_settings(root, {"embed_model": "fake", "home": str(tmp_path / f"home-{name}")})
    run_index(root, True, settings)
    return open_index(root, True, settings, read_only=True)


@pytest.fixture
def events_and_session(make_repo, tmp_path):
    """A file named for sessions that says "session" twice, and a file that says it in every line."""
    files = {
        **_noise(),
        "net/session.py": (
            "class Session:\n"
            "    \"\"\"Keeps a connection pool and default headers.\"\"\"\n\n"
            "    def close(self):\n"
            "        self.pool.clear()\n"
        ),
        "net/events.py": "".join(
            f"def on_session_event_{n}(session):\n    log(session, 'session event', session.id)\n\n"
            for n in range(6)),
    }
    index = _index(make_repo, tmp_path, files)
    yield index
    index.close()


def test_the_file_named_for_what_a_question_asks_comes_first(events_and_session, monkeypatch):
    question = "where is a session kept"
    assert search(events_and_session, question, k=5)[0].path == "net/session.py"
    monkeypatch.setattr(ranking, "PATH_WEIGHT", 0.0)
    assert search(events_and_session, question, k=5)[0].path == "net/events.py"  # the words alone prefer it


def test_a_files_further_matches_rank_behind_the_other_files(make_repo, tmp_path, monkeypatch):
    pad = PAD.replace("value", "pool")
    files = {**_noise(),
             "net/alpha.py": "".join(f"def on_close_{n}(session):\n    log(session.close, session.close)\n{pad}\n\n"
                                     for n in range(4)),
             "net/beta.py": f"def shutdown(session):\n    close(session)\n    session.close()\n{pad}"}
    index = _index(make_repo, tmp_path, files)
    try:
        assert "net/beta.py" in [m.path for m in search(index, "session close", k=3)]
        monkeypatch.setattr(ranking, "FILE_DECAY", 1.0)
        assert [m.path for m in search(index, "session close", k=3)] == ["net/alpha.py"] * 3
    finally:
        index.close()


def test_a_partial_class_finds_the_file_named_for_it_first(make_repo, tmp_path):
    # A C# partial class defined in many files: its home is the file named for it, whatever the alphabet says.
    part = "namespace Data\n{{\n    public static partial class SqlMapper\n    {{\n{body}    }}\n}}\n"
    files = {
        "Data/SqlMapper.Cache.cs": part.format(body="        private static int cacheSize;\n"),
        "Data/SqlMapper.Async.cs": part.format(body="        public static int QueryAsync() { return 1; }\n"),
        "Data/SqlMapper.cs": part.format(body="        public static int Query() { return 0; }\n"),
    }
    index = _index(make_repo, tmp_path, files)
    try:
        first = search(index, "SqlMapper", k=3)[0]
        assert first.path == "Data/SqlMapper.cs" and first.definition
    finally:
        index.close()


def test_a_class_comes_before_its_constructor(make_repo, tmp_path):
    source = (
        "package demo;\n\n"
        "public abstract class TypeAdapter<T> {\n"
        f"{''.join(f'  private int field{n};{chr(10)}' for n in range(40))}"
        "  public TypeAdapter() {\n"
        "    this.field0 = 0;\n"
        "  }\n\n"
        "  public abstract T read(String text);\n"
        "}\n"
    )
    index = _index(make_repo, tmp_path, {"src/demo/TypeAdapter.java": source, "src/demo/Use.java":
                                         "package demo;\n\nclass Use {\n  TypeAdapter<String> a = null;\n}\n"})
    try:
        first = search(index, "TypeAdapter", k=3)[0]
        assert first.definition and first.start_line <= 3 <= first.end_line  # the line that declares the class
    finally:
        index.close()


def test_a_doc_page_and_a_build_file_rank_below_the_code_for_a_code_question(make_repo, tmp_path):
    files = {
        "src/retry.py": "def retry_request(request, attempts):\n    \"\"\"Send a request again after a failure.\"\"\"\n"
                        "    return send(request)\n",
        "docs/retry.md": "# Retry\n\nEvery failed request is retried: retry retry retry, the request retried.\n",
        "build/CMakeLists.txt": "add_library(retry retry.c)\n# retry the request retry request\n",
        "package.json": '{"name": "retry-request", "description": "retry a failed request, retry"}\n',
    }
    index = _index(make_repo, tmp_path, files)
    try:
        assert search(index, "retry a failed request", k=4)[0].path == "src/retry.py"
        # Asked for the documentation, the page is not ranked lower.
        assert search(index, "documentation of request retry", k=4)[0].path == "docs/retry.md"
    finally:
        index.close()


def test_a_sentence_from_a_doc_comment_finds_the_function_it_documents(make_repo, tmp_path, monkeypatch):
    files = {**_noise(), "lib/tokens.py": (
        "def refresh(token):\n"
        "    \"\"\"Return a new access token when the old one has expired.\"\"\"\n" + PAD + "    return token\n\n\n"
        "def describe(token):\n" + PAD +
        "    # expired has one old the when token access new a return; expired one old when token access new return\n"
        "    return 'expired, one, old, when, token, access, new, return, expired, token, access, new'\n")}
    index = _index(make_repo, tmp_path, files)
    try:
        sentence = "Return a new access token when the old one has expired"
        assert search(index, sentence, k=3)[0].start_line == 1
        monkeypatch.setattr(ranking, "PHRASE_WEIGHT", 0.0)
        assert search(index, sentence, k=3)[0].start_line != 1  # the same words, out of order, are more often there
    finally:
        index.close()


def test_a_name_a_question_writes_as_code_lifts_its_definition(make_repo, tmp_path, monkeypatch):
    files = {
        "lib/response.js": "function sendFile(path, options) {\n  return stream(path, options);\n}\n",
        "lib/static.js": "".join(f"function serveStatic{n}(file) {{\n  return 'static file ' + file;\n}}\n"
                                 for n in range(6)),
    }
    index = _index(make_repo, tmp_path, files)
    try:
        question = "static file serving with res.sendFile"
        first = search(index, question, k=3)[0]
        assert first.path == "lib/response.js"
        monkeypatch.setattr(ranking, "MENTION_WEIGHT", 0.0)
        assert search(index, question, k=3)[0].path == "lib/static.js"
    finally:
        index.close()


def test_a_name_declared_in_a_language_no_parser_reads_is_a_definition(make_repo, tmp_path):
    files = {
        "lib/session.dart": "import 'pool.dart';\n\nclass Session {\n  final Pool pool;\n  Session(this.pool);\n}\n",
        "lib/client.dart": "".join(f"void use{n}(Session session) => session.pool;\n" for n in range(10)),
    }
    index = _index(make_repo, tmp_path, files)
    try:
        first = search(index, "Session", k=3)[0]
        assert first.path == "lib/session.dart" and first.definition and first.start_line <= 3 <= first.end_line
        assert first.text and first.title  # a whole match, read from the table like any other
    finally:
        index.close()


def test_a_long_files_many_weak_matches_do_not_outrank_the_one_that_answers(make_repo, tmp_path, monkeypatch):
    # A long module that mentions flags everywhere, and the one class that says which strings are true or false.
    files = {
        **_noise(),
        "cli/types.py": (
            "class BoolParam:\n"
            "    \"\"\"Strings a boolean option accepts: yes, no, on, off, true, false, 1 and 0.\"\"\"\n\n"
            "    def convert(self, text):\n"
            "        return text.lower() in (\"yes\", \"on\", \"true\", \"1\")\n"
        ),
        "cli/core.py": "".join(
            f"def flag_{n}(option):\n    \"\"\"Whether flag {n} is set.\"\"\"\n"
            f"{PAD}{PAD}    return option.flags[{n}]\n\n" for n in range(120)),
    }
    index = _index(make_repo, tmp_path, files)
    question = "which strings are accepted as true or false for boolean flags"
    try:
        assert search(index, question, k=3)[0].path == "cli/types.py"
        monkeypatch.setattr(ranking, "COHERENCE_TOP", 1000)  # every match of a file counted
        assert search(index, question, k=3)[0].path == "cli/core.py"
    finally:
        index.close()


def test_a_c_typedef_is_a_definition_and_a_forward_declaration_is_not(make_repo, tmp_path):
    # A header behind an include guard whose typedefs name types without defining a struct, and CUDA sources (no
    # grammar here: found in the text) where a struct is declared ahead in one file and defined in another.
    files = {
        "zutil.h": ("#ifndef ZUTIL_H\n#define ZUTIL_H\n\ntypedef unsigned char uch;\ntypedef uch FAR uchf;\n"
                    "typedef unsigned short ush;\ntypedef ush FAR ushf;\ntypedef int (*alloc_func)(void *opaque);\n"
                    "\n#endif\n"),
        "inflate.c": "".join(f"static ushf *window{n}(alloc_func f) {{ return f(0); }}\n" for n in range(8)),
        "kernels/launch.cu": ("struct FileMetaData;\n\n"
                              "__global__ void scan(FileMetaData* meta, FileMetaData* into, int n);\n"
                              "void launch(FileMetaData* meta) { scan<<<1, 32>>>(meta, meta, 32); }\n"),
        "kernels/meta.cu": ("struct FileMetaData {\n" + "".join(f"  long field_{n};\n" for n in range(16)) + "};\n"
                            + "".join(f"__device__ long step_{n}(long x) {{ return x + {n}; }}\n" for n in range(8))),
    }
    index = _index(make_repo, tmp_path, files)
    try:
        for name, path, line in (("ushf", "zutil.h", 7), ("alloc_func", "zutil.h", 8),
                                 ("FileMetaData", "kernels/meta.cu", 1)):
            first = search(index, name, k=3)[0]
            assert (first.path, first.definition) == (path, True), name
            assert first.start_line <= line <= first.end_line, name
    finally:
        index.close()


def test_a_c_functions_definition_comes_before_its_prototypes(make_repo, tmp_path, monkeypatch):
    # A header's block of prototypes, and a source file that declares its helper ahead and defines it below: for a
    # function's bare name the body comes first, its prototype block after it.
    names = ["jv_number", "jv_number_value", "jv_is_integer", "jv_number_abs", "jv_array", "jv_array_length"]
    header = "#ifndef JV_H\n#define JV_H\n\ntypedef struct { int kind; double n; } jv;\n\n" + "".join(
        f"jv {name}(jv);\n" for name in names) + "\n#endif\n"
    body = "".join(f"  total = total + value.n * {n};\n  if (total > {n * 100}) total = total / 2;\n"
                   for n in range(14))
    source = ('#include "jv.h"\n\nstatic double clamp_total(double total, double limit);\n\n' + "".join(
        f"jv {name}(jv value) {{\n  double total = 0;\n{body}  value.n = clamp_total(total, 1e9);\n"
        f"  return value;\n}}\n\n" for name in names)
        + "static double clamp_total(double total, double limit) {\n"
        + "".join(f"  if (total > limit * {n}) total = limit;\n" for n in range(12)) + "  return total;\n}\n")
    index = _index(make_repo, tmp_path, {"src/jv.h": header, "src/jv.c": source})
    try:
        defined = {name: next(n for n, line in enumerate(source.splitlines(), 1) if line.startswith(f"jv {name}("))
                   for name in names}
        defined["clamp_total"] = source.splitlines().index(
            "static double clamp_total(double total, double limit) {") + 1
        for name, line in defined.items():
            first = search(index, name, k=5)[0]
            assert (first.path, first.definition) == ("src/jv.c", True), name
            assert first.start_line <= line <= first.end_line, name
        headers = [m for m in search(index, "jv_number_value", k=5) if m.path == "src/jv.h"]
        assert headers and headers[0].definition  # the prototype block still answers, after the body
        monkeypatch.setattr(ranking, "PROTOTYPE_LANGUAGES", frozenset())
        firsts = [search(index, name, k=5)[0] for name in defined]
        assert any(not m.start_line <= defined[n] <= m.end_line for n, m in zip(defined, firsts))
    finally:
        index.close()


def test_a_question_in_a_doc_comments_words_finds_the_code_it_documents(make_repo, tmp_path, monkeypatch):
    # A function whose doc comment is too long to share a chunk with its declaration: the comment's head is a chunk
    # of its own. A question in the comment's words is answered by the function's code, declaration line included,
    # and the doc chunk does not take a second place of its own.
    doc = ("/// Shuts down the blocking pool and waits for its worker threads to exit.\n"
           + "".join(f"/// Step {n}: the pool marks itself closed, wakes every idle worker thread and waits for the "
                     f"last worker thread to exit before the runtime shutdown returns ({n}).\n" for n in range(40)))
    code = ("pub fn drain_pool(pool: &mut Pool, limit: Duration) {\n"
            "    let workers = pool.take_workers();\n"
            "    for handle in workers {\n        let _ = handle.join();\n    }\n}\n")
    files = {"src/pool.rs": "use std::time::Duration;\n\n" + doc + code,
             "src/other.rs": "".join(f"pub fn helper_{n}(x: u32) -> u32 {{\n    x + {n}\n}}\n\n" for n in range(6)),
             "src/go/pool.go": "package pool\n\n" + doc.replace("///", "//")
             + "func DrainPool(limit int) {\n\tfor _, w := range workers {\n\t\tw.Join()\n\t}\n}\n"}
    index = _index(make_repo, tmp_path, files)
    try:
        lines = files["src/pool.rs"].splitlines()
        declared = lines.index(code.splitlines()[0]) + 1
        matches = search(index, "how does the pool wait for its worker threads to exit on shutdown", k=5)
        rust = [m for m in matches if m.path == "src/pool.rs"]
        assert rust and rust[0].start_line <= declared <= rust[0].end_line
        assert not any(m.title.startswith("comment above") for m in matches)  # the comment alone
        go_lines = files["src/go/pool.go"].splitlines()
        go_declared = go_lines.index("func DrainPool(limit int) {") + 1
        go = [m for m in matches if m.path == "src/go/pool.go"]
        assert go and go[0].start_line <= go_declared <= go[0].end_line
        monkeypatch.setattr(docheads, "DOC_DEPTH", 0)  # without the rule the comment's chunks answer by themselves
        matches = search(index, "how does the pool wait for its worker threads to exit on shutdown", k=5)
        assert any(m.title.startswith("comment above") for m in matches)
    finally:
        index.close()


def test_a_verb_and_its_particle_find_the_word_code_writes_as_one(make_repo, tmp_path, monkeypatch):
    # "shut down" in a question, `shutdown` in the code: the compound is searched for too.
    files = {**_noise(),
             "serve/stop.py": "def shutdown(server):\n    server.shutdown()\n",
             "serve/status.py": "def report(server):\n    return 'down' if server.closed else 'up'\n"}
    index = _index(make_repo, tmp_path, files)
    try:
        question = "where do we shut down"  # the keyword arm: the fake embedder's vectors know no words
        assert search(index, question, k=3, mode="bm25")[0].path == "serve/stop.py"
        monkeypatch.setattr(ranking, "PARTICLES", frozenset())
        assert "serve/stop.py" not in [m.path for m in search(index, question, k=3, mode="bm25")]
    finally:
        index.close()


def test_a_prototype_whose_body_no_parser_reads_is_not_put_behind_another_language(make_repo, tmp_path):
    # A C function defined behind an export macro the grammar does not read, declared in its header, and bound in
    # another language under contrib/: the header's prototype is its only C definition and stays first.
    files = {"src/inflate_sync.h": "#ifndef INFLATE_SYNC_H\n#define INFLATE_SYNC_H\nint inflate_sync(void *strm);\n"
                                   "#endif\n",
             "contrib/binding/inflate.py": ("def inflate_sync(stream):\n    \"\"\"Skip to the next flush point.\"\"\"\n"
                                            "    return stream.sync()\n")}
    index = _index(make_repo, tmp_path, files)
    try:
        first = search(index, "inflate_sync", k=3)[0]
        assert (first.path, first.definition) == ("src/inflate_sync.h", True)
    finally:
        index.close()


def test_a_file_named_for_a_name_the_question_writes_as_code_comes_first(make_repo, tmp_path, monkeypatch):
    # The header named for `absl::string_view` defines nothing a parser reads as `string_view`; the file that uses
    # it says its words more often.
    uses = "".join(f"// Finds a part in {'non-owning ' if n < 1 else ''}string references.\n"
                   f"bool Find{n}(absl::string_view text, absl::string_view part) {{\n"
                   f"  return text.find(part) != text.npos;\n}}\n" for n in range(5))
    files = {
        **_noise(),
        "absl/strings/string_view.h": (
            "#ifndef ABSL_STRINGS_STRING_VIEW_H_\n#define ABSL_STRINGS_STRING_VIEW_H_\n"
            "// string_view: references to a string that own nothing, a pointer and a length.\n"
            "#include <string_view>\nnamespace absl {\nusing std::string_view;\n}\n#endif\n"),
        "absl/strings/str_split.cc": uses,
    }
    index = _index(make_repo, tmp_path, files)
    try:
        question = "absl::string_view for non-owning string references"
        assert search(index, question, k=3)[0].path == "absl/strings/string_view.h"
        monkeypatch.setattr(ranking, "STEM_WEIGHT", 0.0)
        assert search(index, question, k=3)[0].path != "absl/strings/string_view.h"
    finally:
        index.close()


def test_a_question_naming_the_project_finds_the_file_named_for_it(make_repo, tmp_path, monkeypatch):
    # nvm is one long script named for the project; the installer of nvm itself is named for the question's verb.
    script = "".join(f"nvm_step_{n}() {{\n  local VERSION\n  VERSION=\"$(nvm_resolve \"$1\")\"\n}}\n\n"
                     for n in range(8))
    files = {
        "nvm.sh": script + "nvm_install_binary() {\n  local VERSION\n  VERSION=\"$1\"\n"
                           "  nvm_download \"node-${VERSION}.tar.gz\"\n}\n",
        "install.sh": "nvm_install_node() {\n  # installs node after nvm itself is installed\n"
                      "  nvm install \"$NODE_VERSION\"\n}\n\nnvm_install_dir() {\n  echo \"$HOME/.nvm\"\n}\n",
    }
    index = _index(make_repo, tmp_path, files, name="nvm")
    try:
        question = "how nvm installs a specific node version"
        assert search(index, question, k=3)[0].path == "nvm.sh"
        monkeypatch.setattr(ranking, "STEM_WEIGHT", 0.0)
        assert search(index, question, k=3)[0].path == "install.sh"
    finally:
        index.close()


def test_the_file_a_question_names_wholly_comes_before_one_it_names_in_part(make_repo, tmp_path, monkeypatch):
    # Two classes that say the same: the question names all of Triple.java's stem and half of MutableTriple.java's.
    def holder(name: str) -> str:
        return (f"package demo;\n\n/** A triple of three related values. */\npublic class {name} {{\n"
                "  public Object left;\n  public Object middle;\n  public Object right;\n}\n")
    files = {**_noise(), "src/demo/Triple.java": holder("Triple"),
             "src/demo/MutableTriple.java": holder("MutableTriple")}
    index = _index(make_repo, tmp_path, files)
    try:
        question = "triple container for three related values"
        assert search(index, question, k=2)[0].path == "src/demo/Triple.java"
        monkeypatch.setattr(ranking, "STEM_FLOOR", 1.0)
        assert search(index, question, k=2)[0].path == "src/demo/MutableTriple.java"
    finally:
        index.close()
    # A package's own file is named by its directory: "which observer is picked" names observers/__init__.py wholly.
    assert ranking.stem_coverage("src/observers/__init__.py", frozenset({"observer", "picked"})) == 1.0
    assert ranking.stem_coverage("src/observers/polling.py", frozenset({"observer", "picked"})) == 0.0
    assert ranking.stem_coverage("src/store/index.py", frozenset({"damaged", "index"})) == 1.0  # a module so named
