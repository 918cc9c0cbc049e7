; Java definitions and calls, after tree-sitter-java's queries/tags.scm (MIT), with the captures localidx adds:
; @body (elided in class skeletons, its statements are split points) and @doc (the Javadoc, or any `/* */` comment,
; just above; annotations are part of the declaration's modifiers, so the comment above them is adjacent).
; Interface methods without a body and abstract methods are not symbols: they stay in their type's skeleton.

; -- types ----------------------------------------------------------------------------------------------------------

((block_comment)* @doc
  .
  (class_declaration
    name: (identifier) @name
    body: (class_body) @body) @definition.class)

((block_comment)* @doc
  .
  (record_declaration
    name: (identifier) @name
    body: (class_body) @body) @definition.class)

((block_comment)* @doc
  .
  (interface_declaration
    name: (identifier) @name
    body: (interface_body) @body) @definition.interface)

((block_comment)* @doc
  .
  (annotation_type_declaration
    name: (identifier) @name
    body: (annotation_type_body) @body) @definition.interface)

((block_comment)* @doc
  .
  (enum_declaration
    name: (identifier) @name
    body: (enum_body) @body) @definition.enum)

; -- methods and constructors ---------------------------------------------------------------------------------------

((block_comment)* @doc
  .
  (method_declaration
    name: (identifier) @name
    body: (block) @body) @definition.method)

((block_comment)* @doc
  .
  (constructor_declaration
    name: (identifier) @name
    body: (constructor_body) @body) @definition.method)

((block_comment)* @doc
  .
  (compact_constructor_declaration
    name: (identifier) @name
    body: (block) @body) @definition.method)

; -- calls ----------------------------------------------------------------------------------------------------------

(method_invocation
  name: (identifier) @name) @reference.call

; `new Loan(...)` calls the constructor.
(object_creation_expression
  type: [
    (type_identifier) @name
    (generic_type (type_identifier) @name)
    (scoped_type_identifier (type_identifier) @name .)
  ]) @reference.call
