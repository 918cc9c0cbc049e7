; Haskell definitions and calls, with the captures localidx adds: @body, @doc (the Haddock `-- |` or plain comments
; just above) and @leading (the type signature written above a function, so it travels with its equations). A
; function defined by several equations is one symbol per equation, the first holding the signature and the doc.
; A data type or newtype is a struct, a type class an interface (its methods' defaults are methods), an instance an
; impl named by the type it is for.

; -- types ----------------------------------------------------------------------------------------------------------

([(haddock) (comment)]* @doc
  .
  [
    (data_type name: (name) @name)
    (newtype name: (name) @name)
  ] @definition.struct)

([(haddock) (comment)]* @doc
  .
  (type_synonym name: (name) @name) @definition.struct)

([(haddock) (comment)]* @doc
  .
  (class name: (name) @name declarations: (class_declarations)? @body) @definition.interface)

([(haddock) (comment)]* @doc
  .
  (instance
    patterns: (type_patterns . [(name) @name (_ . (name) @name)])
    declarations: (instance_declarations)? @body) @definition.impl)

; -- functions ------------------------------------------------------------------------------------------------------

; Functions and values of the module, a class or an instance; bindings in `where` and `let` stay inside their
; function. For each of those three parents: an equation after its signature (and the signature's doc), the first
; equation of the function; then any other equation, or a function without a signature.

(declarations
  [(haddock) (comment)]* @doc
  .
  (signature) @leading
  .
  [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)

(declarations
  [(haddock) (comment)]* @doc
  .
  [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)

(class_declarations
  [(haddock) (comment)]* @doc
  .
  (signature) @leading
  .
  [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)

(class_declarations
  [(haddock) (comment)]* @doc
  .
  [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)

(instance_declarations
  [(haddock) (comment)]* @doc
  .
  (signature) @leading
  .
  [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)

(instance_declarations
  [(haddock) (comment)]* @doc
  .
  [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)

; -- calls ----------------------------------------------------------------------------------------------------------

; f x y is (f x) y: the innermost application names the function.
(apply function: [(variable) @name (qualified (variable) @name)]) @reference.call
