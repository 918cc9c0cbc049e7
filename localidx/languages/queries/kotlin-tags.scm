; Kotlin definitions and calls (tree-sitter-kotlin has no tags.scm of its own), with the captures localidx adds:
; @body (elided in class skeletons, its statements are split points) and @doc (the KDoc / comments just above).

; interface Foo { ... }, sealed interface, fun interface
(
  [(line_comment) (block_comment)]* @doc
  .
  (class_declaration
    "interface"
    name: (identifier) @name
    (class_body)? @body) @definition.interface
)

; The class patterns below are exclusive (each class_declaration matches exactly one of them), because a node that
; two patterns match with a doc comment would be recorded twice by parse().

; enum class Foo { A, B; fun f() ... }
(
  [(line_comment) (block_comment)]* @doc
  .
  (class_declaration
    "class"
    name: (identifier) @name
    (enum_class_body) @body) @definition.enum
)

; class, data class, sealed class, abstract class ... with a body
(
  [(line_comment) (block_comment)]* @doc
  .
  (class_declaration
    "class"
    name: (identifier) @name
    (class_body) @body) @definition.class
)

; class Foo / data class Foo(val x: Int) / class Foo : Bar(), without a body
(
  [(line_comment) (block_comment)]* @doc
  .
  (class_declaration
    "class"
    name: (identifier) @name .) @definition.class
)

(
  [(line_comment) (block_comment)]* @doc
  .
  (class_declaration
    "class"
    name: (identifier) @name
    [(type_parameters) (primary_constructor) (delegation_specifiers) (type_constraints)] .) @definition.class
)

; object Foo { ... } and named companion objects
(
  [(line_comment) (block_comment)]* @doc
  .
  [
    (object_declaration
      name: (identifier) @name
      (class_body)? @body)
    (companion_object
      name: (identifier) @name
      (class_body)? @body)
  ] @definition.class
)

; fun f() { ... }, fun f() = expr, extension functions fun Foo.f(), abstract fun f()
(
  [(line_comment) (block_comment)]* @doc
  .
  (function_declaration
    name: (identifier) @name
    (function_body (block)? @body)?) @definition.function
)

; f(x), obj.f(x), a.b.f { }
(call_expression
  .
  [
    (identifier) @name
    (navigation_expression (identifier) @name .)
  ]) @reference.call
