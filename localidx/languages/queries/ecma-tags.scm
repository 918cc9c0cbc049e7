; Definitions and calls JavaScript and TypeScript share (node names are the same in tree-sitter-javascript and
; tree-sitter-typescript), after their queries/tags.scm (MIT), with the captures localidx adds: @body (elided in class
; skeletons, its statements are split points) and @doc (the comments just above). No language of its own: the
; javascript and typescript files start with `; inherits: ecma`, so this text is read before theirs (nvim-treesitter
; shares its ecma queries the same way).
;
; Every definition node is matched by exactly one pattern, here or in the file that inherits this one. A declaration
; is matched where it stands in a program or a block, and an exported one as its whole `export` statement (the
; comments above belong to the export statement), so the symbol starts at `export` and has its doc. (Two matches of
; one definition would give two symbols.)
; `(program (_)? . (comment)* @doc . X)`: the leading `(_)?` is needed: without it tree-sitter finds no match for an
; X without comments right above it once an earlier sibling of X was a comment.

; -- classes (typescript-tags.scm adds abstract ones) -----------------------------------------------------------------

(program
  (_)? . (comment)* @doc
  .
  (class_declaration name: (_) @name body: (class_body) @body) @definition.class)

(statement_block
  (_)? . (comment)* @doc
  .
  (class_declaration name: (_) @name body: (class_body) @body) @definition.class)

((comment)* @doc
  .
  (export_statement
    declaration: (class_declaration name: (_) @name body: (class_body) @body)) @definition.class)

; A named class expression: `const Store = class Store { ... }`
(class name: (_) @name body: (class_body) @body) @definition.class

; -- methods (classes and object literals) ---------------------------------------------------------------------------

; TypeScript puts a class member's decorators beside it in the class body, between its doc comment and the member;
; JavaScript puts them inside it, so there `(decorator)*` matches none.
((comment)* @doc
  .
  (decorator)* @decorator
  .
  (method_definition
    name: (_) @name
    body: (statement_block) @body) @definition.method)

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
