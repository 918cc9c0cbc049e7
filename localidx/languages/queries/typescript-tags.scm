; inherits: ecma
; TypeScript (and TSX) definitions beyond those it shares with JavaScript (ecma-tags.scm, read first), after
; tree-sitter-typescript's queries/tags.scm (MIT). Read by both the typescript and the tsx grammar (see
; languages.toml): no JSX node names. Interface members, abstract method signatures and type aliases are not symbols:
; they stay in their declaration's chunk. Comments above a `declare ...` statement are not its doc.

; -- abstract classes -------------------------------------------------------------------------------------------------

(program
  (_)? . (comment)* @doc
  .
  (abstract_class_declaration name: (_) @name body: (class_body) @body) @definition.class)

(statement_block
  (_)? . (comment)* @doc
  .
  (abstract_class_declaration name: (_) @name body: (class_body) @body) @definition.class)

((comment)* @doc
  .
  (export_statement
    declaration: (abstract_class_declaration name: (_) @name body: (class_body) @body)) @definition.class)

; -- interfaces, enums, namespaces ----------------------------------------------------------------------------------

(program
  (_)? . (comment)* @doc
  .
  [
    (interface_declaration name: (_) @name body: (_) @body) @definition.interface
    (enum_declaration name: (_) @name body: (enum_body) @body) @definition.enum
    (internal_module name: (_) @name body: (statement_block) @body) @definition.module
  ])

(statement_block
  (_)? . (comment)* @doc
  .
  [
    (interface_declaration name: (_) @name body: (_) @body) @definition.interface
    (enum_declaration name: (_) @name body: (enum_body) @body) @definition.enum
    (internal_module name: (_) @name body: (statement_block) @body) @definition.module
  ])

((comment)* @doc
  .
  (export_statement
    declaration: (interface_declaration name: (_) @name body: (_) @body)) @definition.interface)

((comment)* @doc
  .
  (export_statement
    declaration: (enum_declaration name: (_) @name body: (enum_body) @body)) @definition.enum)

((comment)* @doc
  .
  (export_statement
    declaration: (internal_module name: (_) @name body: (statement_block) @body)) @definition.module)

; `declare namespace N { }`, `declare module "x" { }`
(ambient_declaration
  [
    (internal_module name: (_) @name body: (statement_block) @body)
    (module
      name: [(identifier) @name (nested_identifier) @name (string (string_fragment) @name)]
      body: (statement_block) @body)
  ] @definition.module)

; -- class fields and signatures --------------------------------------------------------------------------------------

; Class fields holding a function: `handle = (event: Event) => { ... }` (their decorators are inside them)
((comment)* @doc
  .
  (public_field_definition
    name: (_) @name
    value: [
      (arrow_function body: (_) @body)
      (function_expression body: (_) @body)
    ]) @definition.method)

; Overload and ambient signatures: `function parse(text: string): Ast;`
(program
  (_)? . (comment)* @doc
  .
  (function_signature name: (identifier) @name) @definition.function)

(statement_block
  (_)? . (comment)* @doc
  .
  (function_signature name: (identifier) @name) @definition.function)

((comment)* @doc
  .
  (export_statement
    declaration: (function_signature name: (identifier) @name)) @definition.function)

(ambient_declaration
  (function_signature name: (identifier) @name) @definition.function)
