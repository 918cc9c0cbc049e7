; TSX only: captures for JSX nodes, which the plain typescript grammar does not have. Read after the shared
; typescript-tags.scm and typescript-chunks.scm (see languages.toml).

; A component used as an element is a call of that component. Lower-case names are HTML elements, not components.
((jsx_opening_element name: [(identifier) @name (member_expression property: (property_identifier) @name)]) @reference.call
  (#match? @name "^[A-Z]"))
((jsx_self_closing_element name: [(identifier) @name (member_expression property: (property_identifier) @name)])
  @reference.call
  (#match? @name "^[A-Z]"))
