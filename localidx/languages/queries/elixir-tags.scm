; Elixir definitions and calls, with the captures localidx adds: @body (the do-block), @doc (the string of the
; `@doc` attribute above a function) and @leading (the module attributes above a definition: `@doc`, `@spec`,
; `@impl`, so they travel with it). Everything in Elixir is a call: a definition is a call of defmodule, def, defp,
; defmacro ... whose first argument names it. A module is a module (its functions stay functions), a protocol an
; interface, an implementation an impl named by its protocol.

; -- modules --------------------------------------------------------------------------------------------------------

((unary_operator)* @leading
  .
  (call
    target: (identifier) @_keyword
    (arguments . (alias) @name)
    (do_block)? @body) @definition.module
  (#any-of? @_keyword "defmodule"))

((unary_operator)* @leading
  .
  (call
    target: (identifier) @_keyword
    (arguments . (alias) @name)
    (do_block)? @body) @definition.interface
  (#eq? @_keyword "defprotocol"))

((unary_operator)* @leading
  .
  (call
    target: (identifier) @_keyword
    (arguments . (alias) @name)
    (do_block)? @body) @definition.impl
  (#eq? @_keyword "defimpl"))

; -- functions ------------------------------------------------------------------------------------------------------

; def name, def name(args), def name(args) when guard; with a do-block or `, do: expr`.
((unary_operator)* @leading
  .
  (call
    target: (identifier) @_keyword
    (arguments
      .
      [
        (identifier) @name
        (call target: (identifier) @name)
        (binary_operator left: [(identifier) @name (call target: (identifier) @name)] operator: "when")
      ])
    (do_block)? @body) @definition.function
  (#any-of? @_keyword "def" "defp" "defmacro" "defmacrop" "defguard" "defguardp" "defdelegate" "defn" "defnp"))

; The same definition after its `@doc "..."` (and other attributes): the string is its doc.
((unary_operator
    operand: (call target: (identifier) @_doc (arguments . [(string) (sigil)] @doc))) @leading
  .
  (unary_operator)* @leading
  .
  (call
    target: (identifier) @_keyword
    (arguments
      .
      [
        (identifier) @name
        (call target: (identifier) @name)
        (binary_operator left: [(identifier) @name (call target: (identifier) @name)] operator: "when")
      ])
    (do_block)? @body) @definition.function
  (#eq? @_doc "doc")
  (#any-of? @_keyword "def" "defp" "defmacro" "defmacrop" "defguard" "defguardp" "defdelegate" "defn" "defnp"))

; -- calls ----------------------------------------------------------------------------------------------------------

; f(x), Mod.f(x), x |> f: not the special forms and definitions, which are syntax.
; (#not-match? rather than #not-any-of?: py-tree-sitter 0.26 keeps a capture that differs from any one value.)
((call target: [(identifier) @name (dot right: (identifier) @name)]) @reference.call
  (#not-match? @name "^(def|defp|defmacro|defmacrop|defguard|defguardp|defdelegate|defn|defnp|defmodule|defprotocol|defimpl|defstruct|defexception|defoverridable|alias|import|require|use|case|cond|if|unless|for|with|try|receive|quote|unquote|raise|reraise|throw|super|describe|test|setup|doc|moduledoc|spec|impl|type|typep|opaque|callback|behaviour|deprecated)$"))

(binary_operator operator: "|>" right: (identifier) @name) @reference.call
