; Captures for chunking and [META] beyond the tags convention.

(module . (expression_statement (string) @doc.module))

[(import_statement) (import_from_statement) (future_import_statement)] @import

(decorator) @decorator

; Flask / FastAPI / Starlette style: @app.get("/path"), @router.post("/path"), @app.route("/path", methods=["PUT"])
(decorator
  (call
    function: (attribute attribute: (identifier) @route.verb)
    arguments: (argument_list . (string (string_content) @route.path)
      (keyword_argument
        name: (identifier) @_methods (#eq? @_methods "methods")
        value: (list (string (string_content) @route.method)))?))
  (#match? @route.verb "^(route|get|post|put|patch|delete|head|options|api_route|websocket)$")) @route

; Django: path("users/<int:pk>/", views.user_detail)
(call
  function: (identifier) @_fn (#match? @_fn "^(path|re_path|url)$")
  arguments: (argument_list . (string (string_content) @route.path) . [(identifier) (attribute)] @route.handler)) @route
