; Captures for chunking and [META] beyond the tags convention.

; The comment that opens a file describes it.
(translation_unit . (comment) @doc.module)

; `#include <vector>` is recorded by its path (the node itself ends with the newline).
(preproc_include path: (_) @import)
(using_declaration) @import

; [[nodiscard]], [[deprecated("...")]]
(attribute_declaration) @decorator

; cpp-httplib: server.Get("/items", handler), server.Post(R"(/items/(\d+))", ...)
(call_expression
  function: (field_expression field: (field_identifier) @route.verb)
  arguments: (argument_list . [(string_literal) (raw_string_literal)] @route.path)
  (#match? @route.verb "^(Get|Post|Put|Patch|Delete|Options)$")) @route

; Crow: CROW_ROUTE(app, "/items/<int>")
(call_expression
  function: (identifier) @_macro
  arguments: (argument_list (_) . (string_literal) @route.path)
  (#eq? @_macro "CROW_ROUTE")) @route
