; inherits: ecma
; JavaScript definitions beyond those it shares with TypeScript (ecma-tags.scm, read first).

; -- class fields -----------------------------------------------------------------------------------------------------

; Class fields holding a function: `handle = (event) => { ... }`
((comment)* @doc
  .
  (field_definition
    property: (_) @name
    value: [
      (arrow_function body: (_) @body)
      (function_expression body: (_) @body)
    ]) @definition.method)
