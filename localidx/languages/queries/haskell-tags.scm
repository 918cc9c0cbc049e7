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
; function. An equation after its signature is the first equation of the function, and the signature starts it.
; Each parent has a pattern with and without each of doc and signature (a `*` quantifier after a parent node misses
; matches); parse() keeps one symbol per name, the widest, with the doc.

(declarations [(haddock) (comment)]+ @doc . (signature) @leading . [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)
(declarations (signature) @leading . [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)
(declarations [(haddock) (comment)]+ @doc . [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)
(declarations [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)

(class_declarations [(haddock) (comment)]+ @doc . (signature) @leading . [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)
(class_declarations (signature) @leading . [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)
(class_declarations [(haddock) (comment)]+ @doc . [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)
(class_declarations [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)

(instance_declarations [(haddock) (comment)]+ @doc . (signature) @leading . [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)
(instance_declarations (signature) @leading . [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)
(instance_declarations [(haddock) (comment)]+ @doc . [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)
(instance_declarations [
    (function name: (variable) @name match: (_) @body)
    (bind name: (variable) @name match: (_) @body)
  ] @definition.function)

; -- calls ----------------------------------------------------------------------------------------------------------

; f x y is (f x) y: the innermost application names the function.
(apply function: [(variable) @name (qualified (variable) @name)]) @reference.call
