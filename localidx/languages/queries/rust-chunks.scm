; Captures for chunking and [META] beyond the tags convention.

; The crate or module doc: `//!` comments at the top of the file.
(source_file . (line_comment inner: (inner_doc_comment_marker))+ @doc.module)
(source_file . (block_comment inner: (inner_doc_comment_marker)) @doc.module)

[(use_declaration) (extern_crate_declaration)] @import

(attribute_item) @decorator

; actix-web / rocket: #[get("/accounts/{id}")] on the handler. The route is captured on the function itself (its
; attributes are siblings before it), so the handler gets the endpoint.
((attribute_item
  (attribute
    [
      (identifier) @route.verb
      (scoped_identifier name: (identifier) @route.verb)
    ]
    arguments: (token_tree . (string_literal) @route.path)))
  .
  (attribute_item)*
  .
  (function_item name: (identifier) @route.handler) @route
  (#match? @route.verb "^(get|post|put|patch|delete|head|options|route)$"))

; axum: Router::new().route("/users", get(list_users)). In these `.route(...)` patterns @route is the argument list,
; so an endpoint's line is the line of its `.route(` in a method chain.
((call_expression
  function: (field_expression field: (field_identifier) @_route)
  arguments: (arguments
    .
    (string_literal) @route.path
    .
    (call_expression
      function: [
        (identifier) @route.verb
        (scoped_identifier name: (identifier) @route.verb)
      ]
      arguments: (arguments
        .
        [
          (identifier) @route.handler
          (scoped_identifier name: (identifier) @route.handler)
        ]
        .))
    .) @route)
  (#eq? @_route "route")
  (#match? @route.verb "^(get|post|put|patch|delete|head|options|any)$"))

; actix-web: App::new().route("/health", web::get().to(health::live))
((call_expression
  function: (field_expression field: (field_identifier) @_route)
  arguments: (arguments
    .
    (string_literal) @route.path
    .
    (call_expression
      function: (field_expression
        value: (call_expression
          function: [
            (identifier) @route.verb
            (scoped_identifier name: (identifier) @route.verb)
          ])
        field: (field_identifier) @_to)
      arguments: (arguments
        .
        [
          (identifier) @route.handler
          (scoped_identifier name: (identifier) @route.handler)
        ]
        .))
    .) @route)
  (#eq? @_route "route")
  (#eq? @_to "to")
  (#match? @route.verb "^(get|post|put|patch|delete|head|options|method)$"))

; axum with two method routers: .route("/users", get(list_users).post(create_user)): both methods, the first handler.
((call_expression
  function: (field_expression field: (field_identifier) @_route)
  arguments: (arguments
    .
    (string_literal) @route.path
    .
    (call_expression
      function: (field_expression
        value: (call_expression
          function: (identifier) @route.method
          arguments: (arguments
            .
            [
              (identifier) @route.handler
              (scoped_identifier name: (identifier) @route.handler)
            ]
            .))
        field: (field_identifier) @route.method))
    .) @route)
  (#eq? @_route "route")
  (#match? @route.method "^(get|post|put|patch|delete|head|options|any)$"))

; Items inside a macro invocation written where items go (`cfg_rt! { pub struct JoinHandle<T> { ... } }`,
; `pin_project! { ... }`, in a file, a `mod` or an impl): the grammar keeps the invocation's body as a token tree, so
; it is parsed again as Rust and what it defines is a symbol like any other, labelled with the macro (`cfg_rt!`).
; Invocations inside function bodies (`select!`, `quote!`) hold expressions or templates, not items: not re-parsed.
(source_file
  (macro_invocation (token_tree) @reparse) @reparse.macro)

(declaration_list
  (macro_invocation (token_tree) @reparse) @reparse.macro)
