; Captures for chunking and [META] beyond the tags convention.

; The comment that opens a file describes it (often its header: file name, purpose, licence).
(source_file . [(comment) (multiline_comment)]+ @doc.module)

(import_declaration) @import
