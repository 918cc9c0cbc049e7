; Captures for chunking and [META] beyond the tags convention.

; The phpdoc that opens a file (right after <?php) describes it.
(program . (php_tag) . (comment) @doc.module)

[
  (namespace_use_declaration)
  (require_expression)
  (require_once_expression)
  (include_expression)
  (include_once_expression)
] @import

; #[Route('/x')], #[ORM\Column] on declarations (not on parameters), one capture per #[...] group
([
  (class_declaration attributes: (attribute_list (attribute_group) @decorator))
  (interface_declaration attributes: (attribute_list (attribute_group) @decorator))
  (trait_declaration attributes: (attribute_list (attribute_group) @decorator))
  (enum_declaration attributes: (attribute_list (attribute_group) @decorator))
  (method_declaration attributes: (attribute_list (attribute_group) @decorator))
  (function_definition attributes: (attribute_list (attribute_group) @decorator))
  (property_declaration attributes: (attribute_list (attribute_group) @decorator))
])

; Symfony: #[Route('/loans/{id}', name: 'loan_show', methods: ['GET', 'HEAD'])]
(attribute
  [(name) (qualified_name (name) .)] @_attribute
  parameters: (arguments
    .
    (argument [(string) (encapsed_string)] @route.path)
    (argument
      name: (name) @_methods
      (array_creation_expression (array_element_initializer [(string) (encapsed_string)] @route.method)))?)
  (#match? @_attribute "Route$")
  (#eq? @_methods "methods")) @route

; Laravel: Route::get('/members/{id}', [MemberController::class, 'show']) or with a closure
(scoped_call_expression
  scope: [(name) @_facade (qualified_name (name) @_facade .)]
  name: (name) @route.verb
  arguments: (arguments
    .
    (argument [(string) (encapsed_string)] @route.path)
    .
    (argument
      (array_creation_expression
        (array_element_initializer)
        .
        (array_element_initializer (string (string_content) @route.handler))))?)
  (#eq? @_facade "Route")
  (#match? @route.verb "^(get|post|put|patch|delete|options|any)$")) @route
