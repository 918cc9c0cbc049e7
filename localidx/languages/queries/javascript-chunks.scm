; inherits: ecma,jsx
; Captures for chunking and [META] beyond the tags convention, beyond those JavaScript shares with TypeScript
; (ecma-chunks.scm) and TSX (jsx-chunks.scm), both read first.

; Decorators of class members are inside them.
(method_definition (decorator) @decorator)
(field_definition (decorator) @decorator)
