; Captures for chunking and [META] beyond the tags convention.

; `//!` comments at the top document the file (the module it is).
((source_file . (comment)+ @doc.module)
  (#match? @doc.module "^//!"))

; const std = @import("std");
(variable_declaration
  (builtin_function (builtin_identifier) @_import (#eq? @_import "@import"))) @import
