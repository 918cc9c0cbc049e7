; C# definitions and calls, after tree-sitter-c-sharp's queries/tags.scm (MIT), with the captures localidx adds:
; @body (elided in class skeletons, its statements are split points) and @doc (the /// XML doc comments just above;
; attributes sit inside the declaration node, so the comments come right before it).

; namespace Shop.Orders { ... }  (a file-scoped `namespace X;` has no body and is left to module code)
(
  (comment)* @doc
  .
  (namespace_declaration
    name: [(identifier) (qualified_name)] @name
    body: (declaration_list) @body) @definition.module
)

(
  (comment)* @doc
  .
  [
    (class_declaration name: (identifier) @name body: (declaration_list) @body) @definition.class
    ; `record Point(int X, int Y);` may have no body
    (record_declaration name: (identifier) @name body: (declaration_list)? @body) @definition.class
    (struct_declaration name: (identifier) @name body: (declaration_list) @body) @definition.struct
    (interface_declaration name: (identifier) @name body: (declaration_list) @body) @definition.interface
    (enum_declaration name: (identifier) @name body: (enum_member_declaration_list) @body) @definition.enum
  ]
)

; Methods and constructors: a block body, an expression body (=> ...), or none (interface, abstract, extern).
(
  (comment)* @doc
  .
  [
    (method_declaration name: (identifier) @name body: (block)? @body) @definition.method
    (constructor_declaration name: (identifier) @name body: (block)? @body) @definition.method
    (destructor_declaration name: (identifier) @name body: (block)? @body) @definition.method
  ]
)

; Local functions inside a method body.
(
  (comment)* @doc
  .
  (local_function_statement name: (identifier) @name body: (block)? @body) @definition.function
)

; F(x), obj.F(x), F<T>(x), obj.F<T>(x), obj?.F(x)
(invocation_expression
  function: [
    (identifier) @name
    (generic_name . (identifier) @name)
    (member_access_expression name: [(identifier) @name (generic_name . (identifier) @name)])
    (conditional_access_expression (member_binding_expression name: [(identifier) @name (generic_name . (identifier) @name)]))
  ]) @reference.call
