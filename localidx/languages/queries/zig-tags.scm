; Zig definitions and calls, with the captures localidx adds: @body (elided in container skeletons, its statements
; are split points) and @doc (the `///` comments just above). A container is a constant bound to a struct, enum,
; union or opaque (`const Param = struct { ... }`), named by the constant. A `test "name" { ... }` block is a
; function named `test`, which marks it as test code; its description stays in its text.

((comment)* @doc
  .
  (variable_declaration
    (identifier) @name
    [(struct_declaration) (opaque_declaration)] @body) @definition.struct)

((comment)* @doc
  .
  (variable_declaration
    (identifier) @name
    (union_declaration) @body) @definition.struct)

((comment)* @doc
  .
  (variable_declaration
    (identifier) @name
    (enum_declaration) @body) @definition.enum)

((comment)* @doc
  .
  (function_declaration
    name: (identifier) @name
    body: (block)? @body) @definition.function)

((comment)* @doc
  .
  (test_declaration "test" @name (block) @body) @definition.function)

(call_expression
  function: [
    (identifier) @name
    (field_expression member: (identifier) @name)
  ]) @reference.call
