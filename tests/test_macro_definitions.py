"""Definitions inside macro invocations and preprocessor blocks are definitions: parsed, chunked, named and found.

What a user would notice: ``search Lines`` on a crate that declares ``pub struct Lines`` inside ``pin_project! { }``
answers with the struct, not with its impls, and [META] says which macro holds it; a C function inside ``#if`` is
found first by its name too. Real git repositories, real LanceDB, the fake embedder.
"""

from __future__ import annotations

from pathlib import Path

from localidx.chunk import chunk_file
from localidx.chunk.parse import parse
from localidx.config import Settings, load_settings
from localidx.index.indexer import run_index
from localidx.languages import language_for_path
from localidx.retrieve.search import search_response
from localidx.store.index import open_index

LINES_RS = """\
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::io::AsyncBufRead;

pin_project! {
    /// Reads an underlying stream one line at a time.
    #[derive(Debug)]
    #[must_use = "streams do nothing unless polled"]
    pub struct Lines<R> {
        #[pin]
        reader: R,
        buf: String,
        bytes: Vec<u8>,
        read: usize,
    }
}

pub(crate) fn lines<R>(reader: R) -> Lines<R>
where
    R: AsyncBufRead,
{
    Lines { reader, buf: String::new(), bytes: Vec::new(), read: 0 }
}

impl<R> Lines<R>
where
    R: AsyncBufRead + Unpin,
{
    /// Returns the next line of the stream, without its newline.
    pub async fn next_line(&mut self) -> std::io::Result<Option<String>> {
        use crate::future::poll_fn;
        poll_fn(|cx| Pin::new(&mut *self).poll_next_line(cx)).await
    }

    /// Consumes the `Lines`, giving back the reader it was made from.
    pub fn into_inner(self) -> R {
        self.reader
    }
}

impl<R> Lines<R>
where
    R: AsyncBufRead,
{
    /// Polls for the next line of the stream.
    pub fn poll_next_line(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<Option<String>>> {
        let me = self.project();
        let n = ready!(read_line_internal(me.reader, cx, me.buf, me.bytes, me.read))?;
        if n == 0 && me.buf.is_empty() {
            return Poll::Ready(Ok(None));
        }
        Poll::Ready(Ok(Some(std::mem::take(me.buf))))
    }
}

unsafe impl<R: Send> Send for Lines<R> {}
unsafe impl<R: Sync> Sync for Lines<R> {}
"""

RUNTIME_RS = """\
cfg_rt! {
    pin_project! {
        /// A future that runs a task to completion on the current thread.
        pub struct BlockingTask<T> {
            #[pin]
            func: Option<T>,
        }
    }

    impl<T> BlockingTask<T> {
        pub(crate) fn new(func: T) -> BlockingTask<T> {
            BlockingTask { func: Some(func) }
        }
    }

    cfg_metrics! {
        /// How many tasks the runtime has spawned so far.
        pub fn spawned_tasks_count(&self) -> u64 {
            self.handle.inner.spawned_tasks_count()
        }
    }
}

fn render() -> proc_macro2::TokenStream {
    quote! {
        pub struct Generated;
    }
}

define_errors!(Closed, Full, Lagged);
"""

# The C fixture ends with definitions inside #if blocks: ring_sync in an #if of its own; in an #ifndef block,
# ring_count (each branch opens it with its own header) and ring_describe (an `else {` opened in one #ifdef and
# closed in another, where the grammar alone loses the function in this file).
RING_C = (Path(__file__).parent / "fixtures" / "languages" / "c" / "sample.c").read_text()


def _symbols(path: str, text: str) -> dict[str, object]:
    """Symbols by ``kind qualified`` (an impl is named by its type)."""
    return {f"{s.kind} {s.qualified}": s for s in parse(language_for_path(path), text.encode()).symbols}


def test_items_inside_rust_macro_invocations_are_symbols_named_with_their_macro():
    symbols = _symbols("src/runtime.rs", RUNTIME_RS)
    task = symbols["struct BlockingTask"]
    assert (task.kind, task.start_line, task.name_line, task.end_line) == ("struct", 3, 4, 7)
    assert task.macro == "pin_project!"  # the innermost invocation
    assert task.doc == "A future that runs a task to completion on the current thread."
    assert symbols["method BlockingTask.new"].macro == "cfg_rt!"
    assert symbols["function spawned_tasks_count"].macro == "cfg_metrics!"
    # A macro in a function body holds code or a template, not the file's items; tokens that are no items are none.
    names = {s.name for s in symbols.values()}
    assert "Generated" not in names
    assert not {"Closed", "Full", "Lagged"} & names


def test_a_definition_inside_a_macro_is_its_own_chunk_and_meta_names_the_macro():
    result = chunk_file("src/io/lines.rs", LINES_RS.encode(), Settings(embed_model="fake"))
    struct = next(c for c in result.chunks if c.kind == "struct")
    assert struct.symbol == "Lines" and struct.start_line <= 10 <= struct.end_line
    assert struct.tags["macro"] == "pin_project!"
    assert "Symbol: Struct Lines (in pin_project!)" in struct.header
    assert struct.end_line == 17  # the invocation's closing brace travels with the struct, not alone in a chunk
    assert all(any(ch.isalnum() for ch in c.text) for c in result.chunks)
    # The lines around the items are still indexed: every line is in some chunk.
    covered = {n for c in result.chunks for n in range(c.start_line, c.end_line + 1)}
    assert all(n in covered for n, line in enumerate(LINES_RS.splitlines(), 1) if line.strip())


def _first_matches(tmp_path: Path, make_repo, files: dict[str, str], *queries: str) -> list[dict]:
    root = make_repo(files)
    settings = load_settings(root, {"embed_model": "fake", "home": str(tmp_path / "home")})
    run_index(root, True, settings)
    index = open_index(root, True, settings, read_only=True)
    try:
        return [search_response(index, query, k=10)["matches"][0] for query in queries]
    finally:
        index.close()


def test_a_struct_declared_in_a_macro_is_found_first_by_its_name_not_its_impls(make_repo, tmp_path):
    files = {"src/io/lines.rs": LINES_RS, "src/runtime.rs": RUNTIME_RS, "src/ring.c": RING_C}
    [first] = _first_matches(tmp_path, make_repo, files, "Lines")
    assert first["path"] == "src/io/lines.rs" and first["start_line"] <= 10 <= first["end_line"], first
    assert first["kind"] == "struct"


def test_a_c_function_cut_in_two_by_if_branches_is_still_a_symbol():
    symbols = _symbols("src/ring.c", RING_C)
    describe = symbols["function ring_describe"]
    assert (describe.start_line, describe.name_line, describe.end_line) == (155, 156, 169)
    assert describe.doc.startswith("One line about the ring for logs")
    # A function whose two branches each open it is one symbol from its first header to its end, not two.
    count = [s for s in symbols.values() if s.name == "ring_count"]
    assert [(s.name_line, s.end_line) for s in count] == [(139, 153)]
    assert {"function ring_sync", "function ring_drain", "function ring_report", "function ring_open"} <= set(symbols)


def test_c_functions_inside_if_blocks_are_found_first_by_their_names(make_repo, tmp_path):
    files = {"src/io/lines.rs": LINES_RS, "src/ring.c": RING_C}
    names = {"ring_sync": 126, "ring_describe": 156}
    for (name, line), first in zip(names.items(), _first_matches(tmp_path, make_repo, files, *names)):
        assert first["path"] == "src/ring.c" and first["start_line"] <= line <= first["end_line"], (name, first)
        assert name in first["symbol"].split(", ")  # alone, or merged with its tiny neighbours
