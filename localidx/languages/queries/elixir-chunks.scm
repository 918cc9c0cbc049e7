; Captures for chunking and [META] beyond the tags convention.

; @moduledoc "..." describes the module.
(unary_operator
  operand: (call target: (identifier) @_moduledoc (arguments . [(string) (sigil)] @doc.module))
  (#eq? @_moduledoc "moduledoc"))

; alias, import, require, use
((call target: (identifier) @_keyword) @import
  (#any-of? @_keyword "alias" "import" "require" "use"))
