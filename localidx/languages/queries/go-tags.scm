; Go definitions and calls, after tree-sitter-go's queries/tags.scm (MIT), with the captures localidx adds:
; @body (elided in skeletons, its statements are split points) and @doc (the `//` comments just above).
; Struct and interface types are symbols; other named types (`type ID string`) are not. An interface has no @body:
; its method specs are not symbols, so it is one chunk, and its signature reads `type Store interface`. Methods are
; top-level declarations in Go, so a method's symbol is not nested in its receiver's struct.

; -- types ----------------------------------------------------------------------------------------------------------

; `type Store struct { ... }`: the whole declaration, so the comments above it are its doc.
((comment)* @doc
  .
  (type_declaration
    .
    (type_spec
      name: (type_identifier) @name
      type: (struct_type (field_declaration_list) @body))
    .) @definition.struct)

((comment)* @doc
  .
  (type_declaration
    .
    (type_spec
      name: (type_identifier) @name
      type: (interface_type))
    .) @definition.interface)

; A group of two or more, `type ( A struct{...}; B interface{...} )`: each spec, with the comments above it inside
; the group (a group of one is matched as a whole above). The first pattern takes every spec but the last, the second
; the last, so no spec is matched twice. (`(_)? .` keeps tree-sitter matching a spec with no comment above it after an
; earlier commented one.)
(type_declaration
  (_)? . (comment)* @doc
  .
  [
    (type_spec
      name: (type_identifier) @name
      type: (struct_type (field_declaration_list) @body)) @definition.struct
    (type_spec
      name: (type_identifier) @name
      type: (interface_type)) @definition.interface
  ]
  (type_spec))

(type_declaration
  (type_spec)
  (_)? . (comment)* @doc
  .
  [
    (type_spec
      name: (type_identifier) @name
      type: (struct_type (field_declaration_list) @body)) @definition.struct
    (type_spec
      name: (type_identifier) @name
      type: (interface_type)) @definition.interface
  ]
  .)

; -- functions and methods ------------------------------------------------------------------------------------------

; @body is the block's statement list (tree-sitter-go wraps the statements of a block in one statement_list node),
; so that each statement of the body is a split point. An empty body `{}` has none.
((comment)* @doc
  .
  (function_declaration
    name: (identifier) @name
    body: (block (statement_list)? @body)) @definition.function)

((comment)* @doc
  .
  (method_declaration
    name: (field_identifier) @name
    body: (block (statement_list)? @body)) @definition.method)

; -- calls ----------------------------------------------------------------------------------------------------------

(call_expression
  function: [
    (identifier) @name
    (parenthesized_expression (identifier) @name)
    (selector_expression field: (field_identifier) @name)
    (parenthesized_expression (selector_expression field: (field_identifier) @name))
    (index_expression operand: [(identifier) @name (selector_expression field: (field_identifier) @name)])
  ]) @reference.call
