; Julia definitions and calls, with the captures localidx adds: @body and @doc (the docstring just above, or `#`
; comments). `function f(x) ... end`, `f(x) = ...`, methods added to another module's function (`Base.push!`) and
; macros are functions, named by their last part; a struct is a struct, an abstract type an interface, a module a
; module around its definitions.

([(string_literal) (line_comment)]* @doc
  .
  (module_definition name: (identifier) @name) @definition.module)

([(string_literal) (line_comment)]* @doc
  .
  (struct_definition
    (type_head
      [
        (identifier) @name
        (parametrized_type_expression . (identifier) @name)
        (binary_expression . [(identifier) @name (parametrized_type_expression . (identifier) @name)])
      ])) @definition.struct)

([(string_literal) (line_comment)]* @doc
  .
  (abstract_definition
    (type_head
      [
        (identifier) @name
        (parametrized_type_expression . (identifier) @name)
        (binary_expression . [(identifier) @name (parametrized_type_expression . (identifier) @name)])
      ])) @definition.interface)

([(string_literal) (line_comment)]* @doc
  .
  [
    (function_definition
      (signature
        [
          (call_expression . [(identifier) @name (field_expression (identifier) @name .)])
          (where_expression . (call_expression . [(identifier) @name (field_expression (identifier) @name .)]))
          (typed_expression . (call_expression . [(identifier) @name (field_expression (identifier) @name .)]))
        ]))
    (macro_definition (signature (call_expression . (identifier) @name)))
  ] @definition.function)

; f(x) = expr, Base.length(q::Deque) = expr: in a file or a module, not inside a function.
([(string_literal) (line_comment)]* @doc
  .
  (assignment
    .
    [
      (call_expression . [(identifier) @name (field_expression (identifier) @name .)])
      (where_expression . (call_expression . [(identifier) @name (field_expression (identifier) @name .)]))
    ]
    (operator) @_eq) @definition.function
  (#eq? @_eq "="))

(call_expression . [(identifier) @name (field_expression (identifier) @name .)]) @reference.call
