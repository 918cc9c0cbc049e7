; Captures for chunking and [META] beyond the tags convention.

; The Haddock comment before the imports (above the module header) describes the module.
(haskell (haddock) @doc.module)

(import) @import
