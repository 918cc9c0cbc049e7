; Perl definitions and calls, with the captures localidx adds: @body (its statements are split points) and @doc
; (the `#` comments, or the POD block, just above a sub). Subs are functions; `package Name { ... }` with a block is
; a module around its subs (a `package Name;` statement has no extent of its own, so its subs stay top-level).

([(comment) (pod)]* @doc
  .
  (subroutine_declaration_statement name: (bareword) @name body: (block) @body) @definition.function)

([(comment) (pod)]* @doc
  .
  (package_statement name: (package) @name (block) @body) @definition.module)

; f(x), f x, Pkg::f(x) (named by its last part), $obj->m(x)
(function_call_expression function: (function) @name) @reference.call
(ambiguous_function_call_expression function: (function) @name) @reference.call
(method_call_expression method: (method) @name) @reference.call
