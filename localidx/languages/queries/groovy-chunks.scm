; Captures for chunking and [META] beyond the tags convention.

(import_declaration) @import
