; Captures for chunking and [META] beyond the tags convention that JavaScript and TypeScript share: the module doc,
; imports, decorators of classes, Express routes. No language of its own: javascript-chunks.scm and
; typescript-chunks.scm start with `; inherits: ecma`, so this text is read before theirs.

(program . (comment) @doc.module)

; ES modules, re-exports and CommonJS `const x = require("x")`
(import_statement) @import

(export_statement source: (string)) @import

((lexical_declaration
  (variable_declarator
    value: (call_expression function: (identifier) @_require arguments: (arguments . (string) .))))
  @import
  (#eq? @_require "require"))

((variable_declaration
  (variable_declarator
    value: (call_expression function: (identifier) @_require arguments: (arguments . (string) .))))
  @import
  (#eq? @_require "require"))

; Decorators of classes (not of parameters: `@Param("id") id` is no decorator of the method); those of class members
; are in javascript-chunks.scm and typescript-chunks.scm (the two grammars place them differently).
(class_declaration (decorator) @decorator)
(class (decorator) @decorator)
(export_statement (decorator) @decorator)

; Express / Koa-router style routes: app.get("/path", handler), router.post("/path", auth, controller.create).
; The receiver must look like an app or router and the path must start with "/", so `map.get("/x")` is no route.
((call_expression
  function: (member_expression
    object: (identifier) @_app
    property: (property_identifier) @route.verb)
  arguments: (arguments
    .
    (string) @route.path
    [(identifier) (member_expression)] @route.handler
    .)) @route
  (#match? @route.verb "^(get|post|put|patch|delete|head|options|all)$")
  (#match? @_app "^(app|api|server|router|routes|[A-Za-z]+(Router|App|Routes))$")
  (#match? @route.path "^.[/]"))

; A route whose handler is written inline: the route, and the statement as a symbol of its own named by its path,
; so the handler's code has a chunk that carries the endpoint.
((call_expression
  function: (member_expression
    object: (identifier) @_app
    property: (property_identifier) @route.verb)
  arguments: (arguments
    .
    (string) @route.path
    [(arrow_function) (function_expression)]
    .)) @route
  (#match? @route.verb "^(get|post|put|patch|delete|head|options|all)$")
  (#match? @_app "^(app|api|server|router|routes|[A-Za-z]+(Router|App|Routes))$")
  (#match? @route.path "^.[/]"))

((comment)* @doc
  .
  (expression_statement
    (call_expression
      function: (member_expression
        object: (identifier) @_app
        property: (property_identifier) @_verb)
      arguments: (arguments
        .
        (string (string_fragment) @name) @_path
        [
          (arrow_function body: (_) @body)
          (function_expression body: (_) @body)
        ]
        .))) @definition.function
  (#match? @_verb "^(get|post|put|patch|delete|head|options|all)$")
  (#match? @_app "^(app|api|server|router|routes|[A-Za-z]+(Router|App|Routes))$")
  (#match? @_path "^.[/]"))
