; Captures for chunking and [META] beyond the tags convention.

(import_declaration) @import

; Annotations of declarations (not of parameters: `@PathVariable String id` is no decorator of the method).
(class_declaration (modifiers [(annotation) (marker_annotation)] @decorator))
(record_declaration (modifiers [(annotation) (marker_annotation)] @decorator))
(interface_declaration (modifiers [(annotation) (marker_annotation)] @decorator))
(enum_declaration (modifiers [(annotation) (marker_annotation)] @decorator))
(method_declaration (modifiers [(annotation) (marker_annotation)] @decorator))
(constructor_declaration (modifiers [(annotation) (marker_annotation)] @decorator))
(field_declaration (modifiers [(annotation) (marker_annotation)] @decorator))

; Spring MVC on a method: @GetMapping("/x"), @PostMapping(value = "/x"), @RequestMapping(path = "/x", method = ...).
; The route is captured on the method declaration, whose symbol gets the endpoint. A class-level
; @RequestMapping("/prefix") is not joined to a method's own path.

; @GetMapping("/x"), @RequestMapping("/x") (any method)
((method_declaration
  (modifiers
    (annotation
      name: (identifier) @route.verb
      arguments: (annotation_argument_list . (string_literal) @route.path)))
  name: (identifier) @route.handler) @route
  (#match? @route.verb "^(Get|Post|Put|Patch|Delete|Request)Mapping$"))

; @GetMapping({"/a", "/b"}): the first path
((method_declaration
  (modifiers
    (annotation
      name: (identifier) @route.verb
      arguments: (annotation_argument_list . (element_value_array_initializer . (string_literal) @route.path))))
  name: (identifier) @route.handler) @route
  (#match? @route.verb "^(Get|Post|Put|Patch|Delete|Request)Mapping$"))

; @GetMapping(value = "/x", produces = "...")
((method_declaration
  (modifiers
    (annotation
      name: (identifier) @route.verb
      arguments: (annotation_argument_list
        (element_value_pair key: (identifier) @_key value: (string_literal) @route.path))))
  name: (identifier) @route.handler) @route
  (#match? @route.verb "^(Get|Post|Put|Patch|Delete)Mapping$")
  (#match? @_key "^(value|path)$"))

; @RequestMapping(path = "/x") alone: any method
((method_declaration
  (modifiers
    (annotation
      name: (identifier) @route.verb
      arguments: (annotation_argument_list
        .
        (element_value_pair key: (identifier) @_key value: (string_literal) @route.path)
        .)))
  name: (identifier) @route.handler) @route
  (#eq? @route.verb "RequestMapping")
  (#match? @_key "^(value|path)$"))

; @RequestMapping(value = "/x", method = RequestMethod.POST) or method = {GET, PUT}, in either order
((method_declaration
  (modifiers
    (annotation
      name: (identifier) @_verb
      arguments: (annotation_argument_list
        (element_value_pair key: (identifier) @_key value: (string_literal) @route.path)
        (element_value_pair
          key: (identifier) @_method
          value: [
            (field_access field: (identifier) @route.method)
            (identifier) @route.method
            (element_value_array_initializer [(field_access field: (identifier) @route.method) (identifier) @route.method])
          ]))))
  name: (identifier) @route.handler) @route
  (#eq? @_verb "RequestMapping")
  (#match? @_key "^(value|path)$")
  (#eq? @_method "method"))

((method_declaration
  (modifiers
    (annotation
      name: (identifier) @_verb
      arguments: (annotation_argument_list
        (element_value_pair
          key: (identifier) @_method
          value: [
            (field_access field: (identifier) @route.method)
            (identifier) @route.method
            (element_value_array_initializer [(field_access field: (identifier) @route.method) (identifier) @route.method])
          ])
        (element_value_pair key: (identifier) @_key value: (string_literal) @route.path))))
  name: (identifier) @route.handler) @route
  (#eq? @_verb "RequestMapping")
  (#match? @_key "^(value|path)$")
  (#eq? @_method "method"))

; A bare @PostMapping (no path of its own) in a controller with @RequestMapping("/prefix"): the prefix is the path.
((class_declaration
  (modifiers
    (annotation
      name: (identifier) @_mapping
      arguments: (annotation_argument_list . (string_literal) @route.path)))
  body: (class_body
    (method_declaration
      (modifiers (marker_annotation name: (identifier) @route.verb))
      name: (identifier) @route.handler) @route))
  (#eq? @_mapping "RequestMapping")
  (#match? @route.verb "^(Get|Post|Put|Patch|Delete|Request)Mapping$"))
