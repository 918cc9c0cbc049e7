; PowerShell definitions and calls, with the captures localidx adds: @body (its statements are split points) and
; @doc (the `#` or `<# .SYNOPSIS #>` comment-based help just above). Functions and filters are functions, classes
; classes with their methods; each command run by name is a call.

((comment)* @doc
  .
  (function_statement
    (function_name) @name
    (script_block (script_block_body)? @body)) @definition.function)

((comment)* @doc
  .
  (class_statement . (simple_name) @name) @definition.class)

((comment)* @doc
  .
  (enum_statement . (simple_name) @name) @definition.enum)

((comment)* @doc
  .
  (class_method_definition
    (simple_name) @name
    (script_block (script_block_body)? @body)) @definition.method)

(command command_name: (command_name) @name) @reference.call

(invokation_expression (member_name (simple_name) @name)) @reference.call
