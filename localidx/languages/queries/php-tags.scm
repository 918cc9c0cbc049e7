; PHP definitions and calls, after tree-sitter-php's queries/tags.scm (MIT), with the captures localidx adds:
; @body (elided in class skeletons, its statements are split points) and @doc (the /** */ phpdoc just above;
; attributes sit inside the declaration node, so the comment comes right before it).

; namespace Foo { ... }  (the file-wide `namespace Foo;` has no body and is left to module code)
(
  (comment)* @doc
  .
  (namespace_definition
    name: (namespace_name) @name
    body: (compound_statement) @body) @definition.module
)

(
  (comment)* @doc
  .
  [
    (class_declaration name: (name) @name body: (declaration_list) @body) @definition.class
    (interface_declaration name: (name) @name body: (declaration_list) @body) @definition.interface
    (trait_declaration name: (name) @name body: (declaration_list) @body) @definition.trait
    (enum_declaration name: (name) @name body: (enum_declaration_list) @body) @definition.enum
  ]
)

; Methods: with a body, or abstract / in an interface.
(
  (comment)* @doc
  .
  (method_declaration
    name: (name) @name
    body: (compound_statement)? @body) @definition.method
)

(
  (comment)* @doc
  .
  (function_definition
    name: (name) @name
    body: (compound_statement) @body) @definition.function
)

; f(x), \Ns\f(x), $obj->f(x), $obj?->f(x), Cls::f(x)
(function_call_expression
  function: [
    (name) @name
    (qualified_name (name) @name .)
  ]) @reference.call

(member_call_expression name: (name) @name) @reference.call

(nullsafe_member_call_expression name: (name) @name) @reference.call

(scoped_call_expression name: (name) @name) @reference.call
