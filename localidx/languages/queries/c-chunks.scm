; Captures for chunking and [META] beyond the tags convention.

; The comment that opens a file describes it.
(translation_unit . (comment) @doc.module)

; `#include <stdio.h>` is recorded by its path (the node itself ends with the newline).
(preproc_include path: (_) @import)

; C23 / GNU attributes: [[nodiscard]], __attribute__((...))
[(attribute_declaration) (attribute_specifier)] @decorator
