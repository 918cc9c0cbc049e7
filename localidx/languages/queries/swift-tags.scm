; Swift definitions and calls, with the captures localidx adds: @body (elided in type skeletons, its statements are
; split points) and @doc (the `///` or `/** */` comments just above). Attributes (@objc, @discardableResult) are part
; of a declaration's modifiers, so they travel with it. tree-sitter-swift reads class, struct, enum, actor and
; extension alike as class_declaration, told apart by their keyword. An extension is an `impl` of the type it extends;
; a protocol is an interface whose requirements are not symbols of their own (one chunk, split at its members).

; -- types ----------------------------------------------------------------------------------------------------------

([(comment) (multiline_comment)]* @doc
  .
  (class_declaration
    declaration_kind: ["class" "actor"]
    name: (type_identifier) @name
    body: (_) @body) @definition.class)

([(comment) (multiline_comment)]* @doc
  .
  (class_declaration
    declaration_kind: "struct"
    name: (type_identifier) @name
    body: (_) @body) @definition.struct)

([(comment) (multiline_comment)]* @doc
  .
  (class_declaration
    declaration_kind: "enum"
    name: (type_identifier) @name
    body: (_) @body) @definition.enum)

([(comment) (multiline_comment)]* @doc
  .
  (class_declaration
    declaration_kind: "extension"
    name: (user_type (type_identifier) @name .)
    body: (_) @body) @definition.impl)

([(comment) (multiline_comment)]* @doc
  .
  (protocol_declaration
    name: (type_identifier) @name
    body: (protocol_body) @body) @definition.interface)

; -- functions ------------------------------------------------------------------------------------------------------

; @body is the statements inside the braces (none in an empty body), each statement a split point.
([(comment) (multiline_comment)]* @doc
  .
  (function_declaration
    name: (simple_identifier) @name
    body: (function_body (statements)? @body)) @definition.function)

([(comment) (multiline_comment)]* @doc
  .
  (init_declaration
    "init" @name
    body: (function_body (statements)? @body)) @definition.method)

([(comment) (multiline_comment)]* @doc
  .
  (deinit_declaration
    "deinit" @name
    body: (function_body (statements)? @body)) @definition.method)

; -- calls ----------------------------------------------------------------------------------------------------------

; f(x), obj.f(x), Type.f(x), and trailing closures f { ... }
(call_expression
  [
    (simple_identifier) @name
    (navigation_expression suffix: (navigation_suffix suffix: (simple_identifier) @name))
  ]) @reference.call
