; inherits: c
; Captures for chunking and [META] beyond the tags convention: those of C (#import and #include by their path, the
; comment that opens the file, attributes), read first.
