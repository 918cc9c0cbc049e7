; Captures for chunking and [META] beyond the tags convention.

; A file KDoc before the package line.
(source_file . (block_comment) @doc.module . (package_header))

(import) @import

; Annotations on declarations (not on parameters).
(modifiers (annotation) @decorator)

; Spring: @GetMapping("/items/{id}"), @PostMapping(value = "/x"), @RequestMapping("/api")
(annotation
  (constructor_invocation
    (user_type (identifier) @route.verb)
    (value_arguments
      .
      (value_argument
        [
          (string_literal) @route.path
          (collection_literal . (string_literal) @route.path)
        ])))
  (#match? @route.verb "^(Get|Post|Put|Patch|Delete|Request)Mapping$")) @route

; Ktor routing DSL: get("/items/{id}") { ... }
(call_expression
  (call_expression
    (identifier) @route.verb
    (value_arguments . (value_argument (string_literal) @route.path)))
  (annotated_lambda)
  (#match? @route.verb "^(get|post|put|patch|delete|head|options|route)$")) @route
