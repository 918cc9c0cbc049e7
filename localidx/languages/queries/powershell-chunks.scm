; Captures for chunking and [META] beyond the tags convention.

; The comment-based help that opens a script describes it.
(program . (comment) @doc.module)

; Import-Module x, using module x, . ./lib.ps1 (dot-sourcing)
((command command_name: (command_name) @_import) @import
  (#match? @_import "^([Ii]mport-[Mm]odule|[Uu]sing)$"))

(command (command_invokation_operator) @_dot (#eq? @_dot ".")) @import
