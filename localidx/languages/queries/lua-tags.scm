; Lua definitions and calls, after tree-sitter-lua's queries/tags.scm (MIT), with the captures localidx adds: @body
; (its statements are split points) and @doc (the `--`/`---` comments just above, LuaDoc annotations included).
; `function M.setup()`, `function M:load()`, `local function f()`, `M.run = function() end` and table fields
; `{ parse = function() end }` are functions named by their last part (`setup`).

((comment)* @doc
  .
  (function_declaration
    name: [
      (identifier) @name
      (dot_index_expression field: (identifier) @name)
      (method_index_expression method: (identifier) @name)
    ]
    body: (block)? @body) @definition.function)

((comment)* @doc
  .
  (assignment_statement
    (variable_list
      .
      name: [(identifier) @name (dot_index_expression field: (identifier) @name)])
    (expression_list . value: (function_definition body: (block)? @body))) @definition.function)

((comment)* @doc
  .
  (variable_declaration
    (assignment_statement
      (variable_list . name: (identifier) @name)
      (expression_list . value: (function_definition body: (block)? @body)))) @definition.function)

((comment)* @doc
  .
  (field
    name: (identifier) @name
    value: (function_definition body: (block)? @body)) @definition.function)

(function_call
  name: [
    (identifier) @name
    (dot_index_expression field: (identifier) @name)
    (method_index_expression method: (identifier) @name)
  ]) @reference.call
