; Python definitions, after tree-sitter-python's queries/tags.scm (MIT), with the captures localidx adds:
; @body (elided in class skeletons, its statements are split points), @doc (docstring), @decorator.
; A decorated definition is captured whole so its decorators stay with it.

(decorated_definition
  definition: (class_definition
    name: (identifier) @name
    body: (block . (expression_statement (string) @doc)?) @body)) @definition.class

(class_definition
  name: (identifier) @name
  body: (block . (expression_statement (string) @doc)?) @body) @definition.class

(decorated_definition
  definition: (function_definition
    name: (identifier) @name
    body: (block . (expression_statement (string) @doc)?) @body)) @definition.function

(function_definition
  name: (identifier) @name
  body: (block . (expression_statement (string) @doc)?) @body) @definition.function

(call
  function: [
      (identifier) @name
      (attribute
        attribute: (identifier) @name)
  ]) @reference.call
