; Scala definitions and calls (Scala 2 and 3), with the captures localidx adds: @body (elided in type skeletons, its
; statements are split points) and @doc (the Scaladoc `/** */` or `//` comments just above). An object is a class of
; one instance, so its defs are methods; a trait is a trait; a case class is a class. Abstract defs (no body) are
; symbols too: a trait's API is found by its names.

; -- types ----------------------------------------------------------------------------------------------------------

([(comment) (block_comment)]* @doc
  .
  [
    (class_definition name: (identifier) @name body: (_)? @body)
    (object_definition name: (identifier) @name body: (_)? @body)
  ] @definition.class)

([(comment) (block_comment)]* @doc
  .
  (trait_definition name: (identifier) @name body: (_)? @body) @definition.trait)

([(comment) (block_comment)]* @doc
  .
  (enum_definition name: (identifier) @name body: (_)? @body) @definition.enum)

; package object p { ... }
([(comment) (block_comment)]* @doc
  .
  (package_object name: (identifier) @name body: (_)? @body) @definition.module)

; -- functions ------------------------------------------------------------------------------------------------------

([(comment) (block_comment)]* @doc
  .
  (function_definition name: (identifier) @name body: (_) @body) @definition.function)

([(comment) (block_comment)]* @doc
  .
  (function_declaration name: (identifier) @name) @definition.function)

; given intRead: Read[Int] with { ... } (Scala 3): an instance with a name
([(comment) (block_comment)]* @doc
  .
  (given_definition name: (identifier) @name body: (_)? @body) @definition.class)

; -- calls ----------------------------------------------------------------------------------------------------------

(call_expression
  function: [
    (identifier) @name
    (field_expression field: (identifier) @name)
    (generic_function function: [(identifier) @name (field_expression field: (identifier) @name)])
  ]) @reference.call

(instance_expression [(type_identifier) @name (generic_type type: (type_identifier) @name)]) @reference.call
