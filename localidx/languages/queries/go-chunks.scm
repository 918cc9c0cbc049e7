; Captures for chunking and [META] beyond the tags convention.

; The package comment: the `//` lines right above the package clause (none when build constraints come first).
((comment)+ @doc.module
  .
  (package_clause)
  (#not-match? @doc.module "^//(go:|[+]build)"))

(import_declaration) @import

; net/http, chi, gin, echo: mux.Handle("/x", h), http.HandleFunc("/x", h), r.GET("/x", mw, h), r.Get("/x", h).
; The path must start with "/" (Go 1.22 patterns "GET /x" too), and a handler must follow it.
; A named handler (`h`, `srv.list`, or the `levelHandler(store)` that builds one) is captured as @route.handler.
((call_expression
  function: (selector_expression field: (field_identifier) @route.verb)
  arguments: (argument_list
    .
    (interpreted_string_literal) @route.path
    .
    (_)*
    .
    [
      (identifier) @route.handler
      (selector_expression) @route.handler
      (call_expression function: [(identifier) (selector_expression)] @route.handler)
    ]
    .)) @route
  (#match? @route.verb "^(Handle|HandleFunc|Get|Post|Put|Patch|Delete|Head|Options|GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS|Any|Connect|Trace|CONNECT|TRACE)$")
  (#match? @route.path "^\"([A-Z]+ +)?/"))

; The same with the handler written inline (a func literal).
((call_expression
  function: (selector_expression field: (field_identifier) @route.verb)
  arguments: (argument_list
    .
    (interpreted_string_literal) @route.path
    .
    (_)*
    .
    (func_literal)
    .)) @route
  (#match? @route.verb "^(Handle|HandleFunc|Get|Post|Put|Patch|Delete|Head|Options|GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS|Any|Connect|Trace|CONNECT|TRACE)$")
  (#match? @route.path "^\"([A-Z]+ +)?/"))
