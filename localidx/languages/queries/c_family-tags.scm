; Definitions C and C++ share (node names are the same in tree-sitter-c and tree-sitter-cpp): typedefs of structs,
; unions and enums. No language of its own: c-tags.scm and cpp-tags.scm start with `; inherits: c_family`, so this
; text is read before theirs. Every definition node is matched by exactly one pattern, here or in the inheriting file.

; typedef struct tag { ... } name_t; is named by its tag; typedef struct { ... } name_t; by the typedef.
((comment)* @doc
  .
  (type_definition
    type: (struct_specifier name: (type_identifier) @name body: (field_declaration_list) @body)) @definition.struct)

((comment)* @doc
  .
  (type_definition
    type: (struct_specifier !name body: (field_declaration_list) @body)
    declarator: (type_identifier) @name) @definition.struct)

((comment)* @doc
  .
  (type_definition
    type: (union_specifier name: (type_identifier) @name body: (field_declaration_list) @body)) @definition.struct)

((comment)* @doc
  .
  (type_definition
    type: (union_specifier !name body: (field_declaration_list) @body)
    declarator: (type_identifier) @name) @definition.struct)

((comment)* @doc
  .
  (type_definition
    type: (enum_specifier name: (type_identifier) @name body: (enumerator_list) @body)) @definition.enum)

((comment)* @doc
  .
  (type_definition
    type: (enum_specifier !name body: (enumerator_list) @body)
    declarator: (type_identifier) @name) @definition.enum)
