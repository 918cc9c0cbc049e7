; Groovy definitions and calls (Gradle build scripts and Jenkins pipelines too), with the captures localidx adds:
; @body (elided in class skeletons, its statements are split points) and @doc (the comments just above). A script's
; `def name(...) { }` is a function; a shared library's `vars/x.groovy` defines its step as `def call(...)`.

([(line_comment) (block_comment)]* @doc
  .
  (class_declaration name: (identifier) @name body: (class_body) @body) @definition.class)

([(line_comment) (block_comment)]* @doc
  .
  (interface_declaration name: (identifier) @name body: (interface_body) @body) @definition.interface)

([(line_comment) (block_comment)]* @doc
  .
  (enum_declaration name: (identifier) @name body: (enum_body) @body) @definition.enum)

([(line_comment) (block_comment)]* @doc
  .
  (function_definition name: (identifier) @name body: (_) @body) @definition.function)

([(line_comment) (block_comment)]* @doc
  .
  (method_declaration name: (identifier) @name body: (block)? @body) @definition.method)

([(line_comment) (block_comment)]* @doc
  .
  (constructor_declaration name: (identifier) @name body: (_) @body) @definition.method)

(method_invocation name: (identifier) @name) @reference.call

(object_creation_expression type: (type_identifier) @name) @reference.call
