; Captures for chunking and [META] beyond the tags convention.

; The comment that opens a script describes it, after its shebang line if it has one.
((program . (comment)+ @doc.module)
  (#not-match? @doc.module "^#!"))

((program . (comment) @_shebang . (comment)+ @doc.module)
  (#match? @_shebang "^#!"))

; source ./lib.sh, . "$DIR/util.sh"
((command name: (command_name (word) @_source)) @import
  (#match? @_source "^(source|\\.)$"))
