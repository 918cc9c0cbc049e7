; Rust definitions and calls, after tree-sitter-rust's queries/tags.scm (MIT), with the captures localidx adds:
; @body (elided in skeletons, its statements are split points) and @doc (the outer doc comments, `///` and `/** */`,
; just above; plain `//` comments are not docs).
; An impl block is named by its type (`impl Audit for Ledger` is an impl named Ledger). A function in an impl or a
; trait becomes a method (parse() does that for functions directly in a class-like symbol); a function in a `mod`
; stays a function. Trait method signatures without a body are not symbols: they stay in the trait's chunk.
;
; Attributes (`#[derive(...)]`, `#[get("/x")]`) are siblings between an item's doc comments and the item, so every
; pattern lists them as `(attribute_item)* @decorator` before the item.

; -- types ----------------------------------------------------------------------------------------------------------

([(line_comment outer: (outer_doc_comment_marker)) (block_comment outer: (outer_doc_comment_marker))]* @doc
  .
  (attribute_item)* @decorator
  .
  (struct_item
    name: (type_identifier) @name
    body: (_)? @body) @definition.struct)

([(line_comment outer: (outer_doc_comment_marker)) (block_comment outer: (outer_doc_comment_marker))]* @doc
  .
  (attribute_item)* @decorator
  .
  (union_item
    name: (type_identifier) @name
    body: (_) @body) @definition.struct)

([(line_comment outer: (outer_doc_comment_marker)) (block_comment outer: (outer_doc_comment_marker))]* @doc
  .
  (attribute_item)* @decorator
  .
  (enum_item
    name: (type_identifier) @name
    body: (enum_variant_list) @body) @definition.enum)

([(line_comment outer: (outer_doc_comment_marker)) (block_comment outer: (outer_doc_comment_marker))]* @doc
  .
  (attribute_item)* @decorator
  .
  (trait_item
    name: (type_identifier) @name
    body: (declaration_list) @body) @definition.trait)

; `impl Ledger { ... }`, `impl<T> Audit for Vec<T> { ... }`: named by the type.
([(line_comment outer: (outer_doc_comment_marker)) (block_comment outer: (outer_doc_comment_marker))]* @doc
  .
  (attribute_item)* @decorator
  .
  (impl_item
    type: [
      (type_identifier) @name
      (generic_type type: (type_identifier) @name)
      (scoped_type_identifier name: (type_identifier) @name)
      (generic_type type: (scoped_type_identifier name: (type_identifier) @name))
    ]
    body: (declaration_list) @body) @definition.impl)

; `mod health { ... }` (a `mod health;` declaration is no symbol)
([(line_comment outer: (outer_doc_comment_marker)) (block_comment outer: (outer_doc_comment_marker))]* @doc
  .
  (attribute_item)* @decorator
  .
  (mod_item
    name: (identifier) @name
    body: (declaration_list) @body) @definition.module)

; -- functions ------------------------------------------------------------------------------------------------------

([(line_comment outer: (outer_doc_comment_marker)) (block_comment outer: (outer_doc_comment_marker))]* @doc
  .
  (attribute_item)* @decorator
  .
  (function_item
    name: (identifier) @name
    body: (block) @body) @definition.function)

; `macro_rules! name { ... }`
([(line_comment outer: (outer_doc_comment_marker)) (block_comment outer: (outer_doc_comment_marker))]* @doc
  .
  (attribute_item)* @decorator
  .
  (macro_definition
    name: (identifier) @name) @definition.function)

; -- calls ----------------------------------------------------------------------------------------------------------

; (`Ok(x)`, `Err(e)`, `Some(x)` build values: no calls.)
((call_expression
  function: [
    (identifier) @name
    (field_expression field: (field_identifier) @name)
    (scoped_identifier name: (identifier) @name)
    (generic_function function: [
      (identifier) @name
      (field_expression field: (field_identifier) @name)
      (scoped_identifier name: (identifier) @name)
    ])
  ]) @reference.call
  (#not-match? @name "^(Ok|Err|Some)$"))

; Macro calls, except the standard library's formatting and assertion macros.
((macro_invocation
  macro: [
    (identifier) @name
    (scoped_identifier name: (identifier) @name)
  ]) @reference.call
  (#not-match? @name "^(format|format_args|print|println|eprint|eprintln|write|writeln|vec|assert|assert_eq|assert_ne|debug_assert|debug_assert_eq|debug_assert_ne|panic|todo|unimplemented|unreachable|matches|dbg|concat|stringify|include_str|include_bytes|env|cfg|line|file|column)$"))
