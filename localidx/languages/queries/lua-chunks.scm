; Captures for chunking and [META] beyond the tags convention.

; The comment that opens a file describes it.
(chunk . (comment)+ @doc.module)

; local x = require("mod")
(variable_declaration
  (assignment_statement
    (expression_list
      value: (function_call name: (identifier) @_require (#eq? @_require "require"))))) @import
