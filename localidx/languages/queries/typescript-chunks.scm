; inherits: ecma
; Captures for chunking and [META] beyond the tags convention, beyond those TypeScript shares with JavaScript
; (ecma-chunks.scm, read first): its decorators and the NestJS route decorators. Read by both the typescript and the
; tsx grammar: no JSX node names here.

; Decorators of class members (not of parameters: `@Param("id") id` is no decorator of the method).
(public_field_definition (decorator) @decorator)
(abstract_class_declaration (decorator) @decorator)
; A class member's decorators are its siblings in the class body.
(class_body (decorator) @decorator)

; NestJS: @Get(":id") / @Post("orders") on a controller method. The route is captured on the method itself, so the
; method gets the endpoint (its decorators are siblings before it in the class body). The controller's own
; @Controller("prefix") is not joined to the path. A bare @Get() has no path string and is not captured.
(class_body
  (decorator
    (call_expression
      function: (identifier) @route.verb
      arguments: (arguments . (string) @route.path)))
  .
  (decorator)*
  .
  (method_definition name: (_) @route.handler) @route
  (#match? @route.verb "^(Get|Post|Put|Patch|Delete|Head|Options|All)$"))
