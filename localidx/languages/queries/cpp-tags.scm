; inherits: c_family
; C++ definitions, after tree-sitter-cpp's queries/tags.scm (MIT), with the captures localidx adds:
; @body (elided in class skeletons, its statements are split points), @doc (the comments just above a definition).
; The typedefs C++ shares with C are in c_family-tags.scm, read first.
;
; Every definition node is matched by exactly one pattern: parse() would record a node twice if two patterns matched
; it and the first had a doc comment. A definition inside a wrapper (template <...>, typedef, `struct S {...} s;`, a
; nested type in a class body) is captured through the wrapper, so `template <...>` / `typedef` stay with it. A bare
; one is matched in three exclusive ways, by what comes just before it: comments (its doc), another node that is not a
; comment nor a template parameter list, or nothing (the first node of a file, namespace or class body).

; Bare functions and types after their doc comments.
((comment)+ @doc
  .
  [
    (function_definition
      declarator: [
        (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name)
        (pointer_declarator declarator: (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name))
        (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name)))
        (reference_declarator (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name))
      ]
      body: (compound_statement) @body) @definition.function
    ; out-of-line member definitions: void Foo::bar() { ... } (name = the last identifier)
    (function_definition
      declarator: [
        (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)]))
        (pointer_declarator declarator: (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)])))
        (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)]))))
        (reference_declarator (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)])))
      ]
      body: (compound_statement) @body) @definition.method
  ])

((comment)+ @doc
  .
  [
    (class_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body) @definition.class
    (struct_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body) @definition.struct
    (union_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body) @definition.struct
    (enum_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (enumerator_list) @body) @definition.enum
  ]
  .
  ";")

; Bare functions and types after another node (not a comment, not template parameters).
((_) @_prev
  .
  [
    (function_definition
      declarator: [
        (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name)
        (pointer_declarator declarator: (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name))
        (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name)))
        (reference_declarator (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name))
      ]
      body: (compound_statement) @body) @definition.function
    ; out-of-line member definitions: void Foo::bar() { ... } (name = the last identifier)
    (function_definition
      declarator: [
        (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)]))
        (pointer_declarator declarator: (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)])))
        (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)]))))
        (reference_declarator (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)])))
      ]
      body: (compound_statement) @body) @definition.method
  ]
  (#not-match? @_prev "^(<|//|/[*])"))

((_) @_prev
  .
  [
    (class_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body) @definition.class
    (struct_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body) @definition.struct
    (union_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body) @definition.struct
    (enum_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (enumerator_list) @body) @definition.enum
  ]
  .
  ";"
  (#not-match? @_prev "^(<|//|/[*])"))

; Bare functions and types first in a file, a namespace or a class body.
(translation_unit
  .
  [
    (function_definition
      declarator: [
        (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name)
        (pointer_declarator declarator: (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name))
        (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name)))
        (reference_declarator (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name))
      ]
      body: (compound_statement) @body) @definition.function
    ; out-of-line member definitions: void Foo::bar() { ... } (name = the last identifier)
    (function_definition
      declarator: [
        (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)]))
        (pointer_declarator declarator: (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)])))
        (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)]))))
        (reference_declarator (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)])))
      ]
      body: (compound_statement) @body) @definition.method
  ])

(translation_unit
  .
  [
    (class_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body) @definition.class
    (struct_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body) @definition.struct
    (union_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body) @definition.struct
    (enum_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (enumerator_list) @body) @definition.enum
  ]
  .
  ";")

(declaration_list
  .
  [
    (function_definition
      declarator: [
        (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name)
        (pointer_declarator declarator: (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name))
        (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name)))
        (reference_declarator (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name))
      ]
      body: (compound_statement) @body) @definition.function
    ; out-of-line member definitions: void Foo::bar() { ... } (name = the last identifier)
    (function_definition
      declarator: [
        (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)]))
        (pointer_declarator declarator: (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)])))
        (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)]))))
        (reference_declarator (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)])))
      ]
      body: (compound_statement) @body) @definition.method
  ])

(declaration_list
  .
  [
    (class_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body) @definition.class
    (struct_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body) @definition.struct
    (union_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body) @definition.struct
    (enum_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (enumerator_list) @body) @definition.enum
  ]
  .
  ";")

(field_declaration_list
  .
  [
    (function_definition
      declarator: [
        (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name)
        (pointer_declarator declarator: (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name))
        (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name)))
        (reference_declarator (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name))
      ]
      body: (compound_statement) @body) @definition.function
    ; out-of-line member definitions: void Foo::bar() { ... } (name = the last identifier)
    (function_definition
      declarator: [
        (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)]))
        (pointer_declarator declarator: (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)])))
        (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)]))))
        (reference_declarator (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)])))
      ]
      body: (compound_statement) @body) @definition.method
  ])

; struct tag { ... } variable;
((comment)* @doc
  .
  (declaration
    type: (class_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body)) @definition.class)

((comment)* @doc
  .
  (declaration
    type: (struct_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body)) @definition.struct)

((comment)* @doc
  .
  (declaration
    type: (union_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body)) @definition.struct)

((comment)* @doc
  .
  (declaration
    type: (enum_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (enumerator_list) @body)) @definition.enum)

; A type nested in a class body.
((comment)* @doc
  .
  (field_declaration
    type: (class_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body)) @definition.class)

((comment)* @doc
  .
  (field_declaration
    type: (struct_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body)) @definition.struct)

((comment)* @doc
  .
  (field_declaration
    type: (union_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body)) @definition.struct)

((comment)* @doc
  .
  (field_declaration
    type: (enum_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (enumerator_list) @body)) @definition.enum)

; template <typename T> class/struct/function: the template is the definition, so its parameters stay with it.
((comment)* @doc
  .
  (template_declaration
    (class_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body)) @definition.class)

((comment)* @doc
  .
  (template_declaration
    [
      (struct_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body)
      (union_specifier name: [(type_identifier) @name (template_type name: (type_identifier) @name)] body: (field_declaration_list) @body)
    ]) @definition.struct)

((comment)* @doc
  .
  (template_declaration
    (function_definition
      declarator: [
        (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name)
        (pointer_declarator declarator: (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name))
        (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name)))
        (reference_declarator (function_declarator declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name))
      ]
      body: (compound_statement) @body)) @definition.function)

((comment)* @doc
  .
  (template_declaration
    (function_definition
      declarator: [
        (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)]))
        (pointer_declarator declarator: (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)])))
        (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)]))))
        (reference_declarator (function_declarator declarator: (qualified_identifier name: [(identifier) @name (destructor_name) @name (operator_name) @name (qualified_identifier name: (_) @name)])))
      ]
      body: (compound_statement) @body)) @definition.method)

; namespace a { ... }, namespace a::b { ... }
((comment)* @doc
  .
  (namespace_definition
    name: [(namespace_identifier) @name (nested_namespace_specifier (namespace_identifier) @name .)]
    body: (declaration_list) @body) @definition.module)

; Calls: f(x), obj.f(x), ptr->f(x), f<T>(x), obj.template f<T>(x), ns::f(x), std::chrono::steady_clock::now().
(call_expression
  function: [
    (identifier) @name
    (field_expression field: (field_identifier) @name)
    (template_function name: (identifier) @name)
    (field_expression field: (template_method name: (field_identifier) @name))
    (qualified_identifier name: [(identifier) @name (template_function name: (identifier) @name)])
    (qualified_identifier name: (qualified_identifier name: [(identifier) @name (template_function name: (identifier) @name)]))
    (qualified_identifier name: (qualified_identifier name: (qualified_identifier name: [(identifier) @name (template_function name: (identifier) @name)])))
  ]) @reference.call
