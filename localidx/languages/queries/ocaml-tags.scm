; OCaml definitions and calls, after tree-sitter-ocaml's queries/tags.scm (MIT), with the captures localidx adds:
; @body (elided in module skeletons, its items are split points) and @doc (the `(** *)` comment just above). Let
; bindings of a file or a module (`let f x = ...`, `let rec f = function ...`, values too) are functions, named by
; their first binding; `let ... in` inside an expression stays in its function. A module is a module, a module type
; an interface, a type a struct, a class a class with its methods.

; -- modules and types ----------------------------------------------------------------------------------------------

((comment)* @doc
  .
  (module_definition
    (module_binding (module_name) @name body: (_)? @body)) @definition.module)

((comment)* @doc
  .
  (module_type_definition (module_type_name) @name body: (_)? @body) @definition.interface)

((comment)* @doc
  .
  (type_definition
    .
    (type_binding name: [(type_constructor) @name (type_constructor_path (type_constructor) @name)])) @definition.struct)

((comment)* @doc
  .
  (class_definition (class_binding (class_name) @name body: (_)? @body)) @definition.class)

((comment)* @doc
  .
  (method_definition (method_name) @name body: (_)? @body) @definition.method)

; -- values and functions -------------------------------------------------------------------------------------------

; (A definition with a doc comment matches both patterns of its parent; parse() keeps one symbol with the doc.)
(compilation_unit
  (comment)+ @doc
  .
  (value_definition . (let_binding pattern: (value_name) @name body: (_)? @body)) @definition.function)

(compilation_unit
  (value_definition . (let_binding pattern: (value_name) @name body: (_)? @body)) @definition.function)

(structure
  (comment)+ @doc
  .
  (value_definition . (let_binding pattern: (value_name) @name body: (_)? @body)) @definition.function)

(structure
  (value_definition . (let_binding pattern: (value_name) @name body: (_)? @body)) @definition.function)

; `val read : string -> t` in a signature: the interface's API
((comment)* @doc
  .
  (value_specification (value_name) @name) @definition.function)

; -- calls ----------------------------------------------------------------------------------------------------------

(application_expression function: (value_path (value_name) @name)) @reference.call

(method_invocation (method_name) @name) @reference.call
