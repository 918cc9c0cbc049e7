; TypeScript (and TSX) definitions and calls, after tree-sitter-javascript's and tree-sitter-typescript's
; queries/tags.scm (MIT): the JavaScript patterns (node names are shared) plus the TypeScript-only constructs, with the
; captures localidx adds: @body (elided in class skeletons, its statements are split points) and @doc (the comments
; just above). This file is read by both the typescript and the tsx grammar (see languages.toml): no JSX node names.
; Interface members, abstract method signatures and type aliases are not symbols: they stay in their declaration's
; chunk. Comments above a `declare ...` statement are not its doc.
;
; Every definition node is matched by exactly one pattern. A declaration is matched where it stands in a program or
; a block, and an exported one as its whole `export` statement (the comments above belong to the export statement),
; so the symbol starts at `export` and has its doc. (Two matches of one definition would give two symbols.)
; `(program (_)? . (comment)* @doc . X)`: the leading `(_)?` is needed: without it tree-sitter finds no match for an
; X without comments right above it once an earlier sibling of X was a comment.

; -- classes --------------------------------------------------------------------------------------------------------

(program
  (_)? . (comment)* @doc
  .
  [
    (class_declaration name: (_) @name body: (class_body) @body)
    (abstract_class_declaration name: (_) @name body: (class_body) @body)
  ] @definition.class)

(statement_block
  (_)? . (comment)* @doc
  .
  [
    (class_declaration name: (_) @name body: (class_body) @body)
    (abstract_class_declaration name: (_) @name body: (class_body) @body)
  ] @definition.class)

((comment)* @doc
  .
  (export_statement
    declaration: [
      (class_declaration name: (_) @name body: (class_body) @body)
      (abstract_class_declaration name: (_) @name body: (class_body) @body)
    ]) @definition.class)

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

; A named class expression: `const Store = class Store { ... }`
(class name: (_) @name body: (class_body) @body) @definition.class

; -- methods (classes and object literals) ---------------------------------------------------------------------------

; The decorators of a class member are its siblings in the class body, between its doc comment and the member.
((comment)* @doc
  .
  (decorator)* @decorator
  .
  (method_definition
    name: (_) @name
    body: (statement_block) @body) @definition.method)

; Class fields holding a function: `handle = (event: Event) => { ... }` (their decorators are inside them)
((comment)* @doc
  .
  (public_field_definition
    name: (_) @name
    value: [
      (arrow_function body: (_) @body)
      (function_expression body: (_) @body)
    ]) @definition.method)

; -- functions ------------------------------------------------------------------------------------------------------

(program
  (_)? . (comment)* @doc
  .
  [
    (function_declaration name: (identifier) @name body: (statement_block) @body)
    (generator_function_declaration name: (identifier) @name body: (statement_block) @body)
  ] @definition.function)

(statement_block
  (_)? . (comment)* @doc
  .
  [
    (function_declaration name: (identifier) @name body: (statement_block) @body)
    (generator_function_declaration name: (identifier) @name body: (statement_block) @body)
  ] @definition.function)

((comment)* @doc
  .
  (export_statement
    declaration: [
      (function_declaration name: (identifier) @name body: (statement_block) @body)
      (generator_function_declaration name: (identifier) @name body: (statement_block) @body)
    ]) @definition.function)

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

; `const f = () => {}`, `let g = function () {}`: the whole declaration is the symbol, named by the variable.
(program
  (_)? . (comment)* @doc
  .
  [
    (lexical_declaration
      (variable_declarator
        name: (identifier) @name
        value: [
          (arrow_function body: (_) @body)
          (function_expression body: (_) @body)
          (generator_function body: (_) @body)
        ]))
    (variable_declaration
      (variable_declarator
        name: (identifier) @name
        value: [
          (arrow_function body: (_) @body)
          (function_expression body: (_) @body)
          (generator_function body: (_) @body)
        ]))
  ] @definition.function)

(statement_block
  (_)? . (comment)* @doc
  .
  [
    (lexical_declaration
      (variable_declarator
        name: (identifier) @name
        value: [
          (arrow_function body: (_) @body)
          (function_expression body: (_) @body)
          (generator_function body: (_) @body)
        ]))
    (variable_declaration
      (variable_declarator
        name: (identifier) @name
        value: [
          (arrow_function body: (_) @body)
          (function_expression body: (_) @body)
          (generator_function body: (_) @body)
        ]))
  ] @definition.function)

((comment)* @doc
  .
  (export_statement
    declaration: (lexical_declaration
      (variable_declarator
        name: (identifier) @name
        value: [
          (arrow_function body: (_) @body)
          (function_expression body: (_) @body)
          (generator_function body: (_) @body)
        ]))) @definition.function)

; `exports.handler = async (event) => {}`, `Foo.prototype.bar = function () {}`
((comment)* @doc
  .
  (expression_statement
    (assignment_expression
      left: [
        (identifier) @name
        (member_expression property: (property_identifier) @name)
      ]
      right: [
        (arrow_function body: (_) @body)
        (function_expression body: (_) @body)
      ])) @definition.function)

; `{ key: () => {} }` in an object literal
((comment)* @doc
  .
  (pair
    key: (property_identifier) @name
    value: [
      (arrow_function body: (_) @body)
      (function_expression body: (_) @body)
    ]) @definition.function)

; -- calls ----------------------------------------------------------------------------------------------------------

((call_expression
  function: (identifier) @name) @reference.call
  (#not-match? @name "^(require)$"))

(call_expression
  function: (member_expression
    property: (property_identifier) @name)) @reference.call

; `new OrderStore()` calls the class's constructor.
(new_expression
  constructor: [
    (identifier) @name
    (member_expression property: (property_identifier) @name)
  ]) @reference.call
