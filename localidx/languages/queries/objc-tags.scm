; inherits: c
; Objective-C definitions and calls, with the captures localidx adds: @body (elided in class skeletons, its
; statements are split points) and @doc (the comments just above). C's functions, structs, enums and calls come
; from c-tags.scm (and c_family-tags.scm), read first: tree-sitter-objc extends tree-sitter-c. An @interface is an
; interface of the class it declares, an @implementation the class with its methods, a @protocol an interface; a
; method is named by its first selector part (`initWithBaseURL` for `initWithBaseURL:sessionConfiguration:`).

((comment)* @doc
  .
  (class_interface . (identifier) @name) @definition.interface)

((comment)* @doc
  .
  (protocol_declaration . (identifier) @name) @definition.interface)

((comment)* @doc
  .
  (class_implementation . (identifier) @name) @definition.class)

((comment)* @doc
  .
  (implementation_definition
    (method_definition . (method_type)? . (identifier) @name (compound_statement) @body)) @definition.method)

((comment)* @doc
  .
  (method_declaration . (method_type)? . (identifier) @name) @definition.method)

; [receiver selector:arg ...]: the first selector part
(message_expression method: (identifier) @name) @reference.call
