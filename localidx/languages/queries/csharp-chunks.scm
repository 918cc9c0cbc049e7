; Captures for chunking and [META] beyond the tags convention.

; The comment that opens a file describes it.
(compilation_unit . (comment) @doc.module)

(using_directive) @import

; [ApiController], [Route("api/x")], [HttpGet("{id}")] on declarations (not on parameters)
([
  (class_declaration (attribute_list) @decorator)
  (record_declaration (attribute_list) @decorator)
  (struct_declaration (attribute_list) @decorator)
  (interface_declaration (attribute_list) @decorator)
  (enum_declaration (attribute_list) @decorator)
  (method_declaration (attribute_list) @decorator)
  (constructor_declaration (attribute_list) @decorator)
  (property_declaration (attribute_list) @decorator)
])

; ASP.NET Core attribute routing: [HttpGet("{id}")], [HttpPost("items")], [Route("api/orders")]
(attribute
  name: (identifier) @route.verb
  (attribute_argument_list . (attribute_argument (string_literal) @route.path))
  (#match? @route.verb "^(HttpGet|HttpPost|HttpPut|HttpPatch|HttpDelete|HttpHead|HttpOptions|Route)$")) @route

; Minimal APIs: app.MapGet("/orders/{id}", handler) or with a lambda
(invocation_expression
  function: (member_access_expression name: (identifier) @route.verb)
  arguments: (argument_list
    .
    (argument (string_literal) @route.path)
    .
    (argument [(identifier) (member_access_expression)] @route.handler)?)
  (#match? @route.verb "^Map(Get|Post|Put|Patch|Delete)$")) @route
