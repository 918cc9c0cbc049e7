; Captures for chunking and [META] beyond the tags convention.

[(using_statement) (import_statement)] @import
