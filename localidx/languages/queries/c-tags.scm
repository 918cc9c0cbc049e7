; inherits: c_family
; C definitions, after tree-sitter-c's queries/tags.scm (MIT), with the captures localidx adds:
; @body (elided in skeletons, its statements are split points), @doc (the comments just above a definition).
; The typedefs C shares with C++ are in c_family-tags.scm, read first.
;
; Every definition node is matched by exactly one pattern: parse() would record a node twice if two patterns matched
; it and the first had a doc comment. So a struct/union/enum inside `typedef` or a declaration is captured through that
; wrapper (which keeps `typedef` and the declarator with it), and a bare one only when `;` follows it directly.

((comment)* @doc
  .
  (function_definition
    declarator: [
      (function_declarator declarator: (identifier) @name)
      (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))
      (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name)))
    ]
    body: (compound_statement) @body) @definition.function)

; Prototypes (header files): a function symbol without a body.
((comment)* @doc
  .
  (declaration
    declarator: [
      (function_declarator declarator: (identifier) @name)
      (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))
      (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name)))
    ]) @definition.function)

; struct tag { ... };
((comment)* @doc
  .
  [
    (struct_specifier name: (type_identifier) @name body: (field_declaration_list) @body) @definition.struct
    (union_specifier name: (type_identifier) @name body: (field_declaration_list) @body) @definition.struct
    (enum_specifier name: (type_identifier) @name body: (enumerator_list) @body) @definition.enum
  ]
  .
  ";")

; struct tag { ... } variable;
((comment)* @doc
  .
  (declaration
    type: (struct_specifier name: (type_identifier) @name body: (field_declaration_list) @body)) @definition.struct)

((comment)* @doc
  .
  (declaration
    type: (union_specifier name: (type_identifier) @name body: (field_declaration_list) @body)) @definition.struct)

((comment)* @doc
  .
  (declaration
    type: (enum_specifier name: (type_identifier) @name body: (enumerator_list) @body)) @definition.enum)

; Calls: f(x), obj.f(x), ptr->f(x).
(call_expression
  function: [
    (identifier) @name
    (field_expression field: (field_identifier) @name)
  ]) @reference.call
