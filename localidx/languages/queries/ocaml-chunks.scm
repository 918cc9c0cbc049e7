; Captures for chunking and [META] beyond the tags convention.

; The comment that opens a file describes it.
(compilation_unit . (comment) @doc.module)

[(open_module) (include_module)] @import
