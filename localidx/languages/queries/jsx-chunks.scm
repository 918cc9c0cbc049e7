; JSX: captures for the JSX nodes that the javascript and tsx grammars have and the plain typescript grammar has not.
; No language of its own: javascript-chunks.scm inherits it, and tsx reads it after the typescript files (see
; languages.toml).

; A component used as an element is a call of that component. Lower-case names are HTML elements, not components.
((jsx_opening_element name: [(identifier) @name (member_expression property: (property_identifier) @name)]) @reference.call
  (#match? @name "^[A-Z]"))
((jsx_self_closing_element name: [(identifier) @name (member_expression property: (property_identifier) @name)])
  @reference.call
  (#match? @name "^[A-Z]"))
