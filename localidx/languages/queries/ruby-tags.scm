; Ruby definitions and calls, after tree-sitter-ruby's queries/tags.scm (MIT), with the captures localidx adds:
; @body (elided in class skeletons, its statements are split points) and @doc (the # comments just above;
; parse() keeps only the adjacent run and strips the markers, so no #strip!/#select-adjacent! here).
;
; tree-sitter-ruby puts the comments that open a class/module/block body before its body_statement, not inside it, so
; the first definition of a body finds its doc there. Every definition is matched by exactly one of the five patterns
; below, chosen by what precedes it (parse() would record a node twice if two patterns matched it and the first had a
; doc comment): comments; another node; nothing, in the file; nothing, in a body after comments; nothing, in a body
; after another node or nothing.

; 1. After comments (its doc).
(
  (comment)+ @doc
  .
  [
    (class
      name: [(constant) @name (scope_resolution name: (_) @name)]
      body: (body_statement)? @body) @definition.class
    (module
      name: [(constant) @name (scope_resolution name: (_) @name)]
      body: (body_statement)? @body) @definition.module
    ; def name ... end, def self.name ... end, def name(x) = expr (a function; a method inside a class)
    (method name: (_) @name body: (body_statement)? @body) @definition.function
    (singleton_method name: (_) @name body: (body_statement)? @body) @definition.function
    ; Sinatra-style route blocks (get "/path" do ... end) are handlers of their own, named by their path
    (call
      method: (identifier) @_verb
      arguments: (argument_list . (string (string_content) @name))
      block: (do_block body: (body_statement)? @body)) @definition.function
  ]
  (#match? @_verb "^(get|post|put|patch|delete|head|options)$")
)

; 2. After another statement.
(
  (_) @_prev
  .
  [
    (class
      name: [(constant) @name (scope_resolution name: (_) @name)]
      body: (body_statement)? @body) @definition.class
    (module
      name: [(constant) @name (scope_resolution name: (_) @name)]
      body: (body_statement)? @body) @definition.module
    ; def name ... end, def self.name ... end, def name(x) = expr (a function; a method inside a class)
    (method name: (_) @name body: (body_statement)? @body) @definition.function
    (singleton_method name: (_) @name body: (body_statement)? @body) @definition.function
    ; Sinatra-style route blocks (get "/path" do ... end) are handlers of their own, named by their path
    (call
      method: (identifier) @_verb
      arguments: (argument_list . (string (string_content) @name))
      block: (do_block body: (body_statement)? @body)) @definition.function
  ]
  (#not-match? @_prev "^(#|=begin)")
  (#match? @_verb "^(get|post|put|patch|delete|head|options)$")
)

; 3. First in the file.
(program
  .
  [
    (class
      name: [(constant) @name (scope_resolution name: (_) @name)]
      body: (body_statement)? @body) @definition.class
    (module
      name: [(constant) @name (scope_resolution name: (_) @name)]
      body: (body_statement)? @body) @definition.module
    ; def name ... end, def self.name ... end, def name(x) = expr (a function; a method inside a class)
    (method name: (_) @name body: (body_statement)? @body) @definition.function
    (singleton_method name: (_) @name body: (body_statement)? @body) @definition.function
    ; Sinatra-style route blocks (get "/path" do ... end) are handlers of their own, named by their path
    (call
      method: (identifier) @_verb
      arguments: (argument_list . (string (string_content) @name))
      block: (do_block body: (body_statement)? @body)) @definition.function
  ]
  (#match? @_verb "^(get|post|put|patch|delete|head|options)$")
)

; 4. First in a body that opens with comments (its doc).
(_
  (comment)+ @doc
  .
  (body_statement
    .
    [
      (class
        name: [(constant) @name (scope_resolution name: (_) @name)]
        body: (body_statement)? @body) @definition.class
      (module
        name: [(constant) @name (scope_resolution name: (_) @name)]
        body: (body_statement)? @body) @definition.module
      ; def name ... end, def self.name ... end, def name(x) = expr (a function; a method inside a class)
      (method name: (_) @name body: (body_statement)? @body) @definition.function
      (singleton_method name: (_) @name body: (body_statement)? @body) @definition.function
      ; Sinatra-style route blocks (get "/path" do ... end) are handlers of their own, named by their path
      (call
        method: (identifier) @_verb
        arguments: (argument_list . (string (string_content) @name))
        block: (do_block body: (body_statement)? @body)) @definition.function
    ])
  (#match? @_verb "^(get|post|put|patch|delete|head|options)$")
)

; 5. First in a body that opens without comments.
(_
  (_) @_prev
  .
  (body_statement
    .
    [
      (class
        name: [(constant) @name (scope_resolution name: (_) @name)]
        body: (body_statement)? @body) @definition.class
      (module
        name: [(constant) @name (scope_resolution name: (_) @name)]
        body: (body_statement)? @body) @definition.module
      ; def name ... end, def self.name ... end, def name(x) = expr (a function; a method inside a class)
      (method name: (_) @name body: (body_statement)? @body) @definition.function
      (singleton_method name: (_) @name body: (body_statement)? @body) @definition.function
      ; Sinatra-style route blocks (get "/path" do ... end) are handlers of their own, named by their path
      (call
        method: (identifier) @_verb
        arguments: (argument_list . (string (string_content) @name))
        block: (do_block body: (body_statement)? @body)) @definition.function
    ])
  (#not-match? @_prev "^(#|=begin)")
  (#match? @_verb "^(get|post|put|patch|delete|head|options)$")
)

(_
  .
  (body_statement
    .
    [
      (class
        name: [(constant) @name (scope_resolution name: (_) @name)]
        body: (body_statement)? @body) @definition.class
      (module
        name: [(constant) @name (scope_resolution name: (_) @name)]
        body: (body_statement)? @body) @definition.module
      ; def name ... end, def self.name ... end, def name(x) = expr (a function; a method inside a class)
      (method name: (_) @name body: (body_statement)? @body) @definition.function
      (singleton_method name: (_) @name body: (body_statement)? @body) @definition.function
      ; Sinatra-style route blocks (get "/path" do ... end) are handlers of their own, named by their path
      (call
        method: (identifier) @_verb
        arguments: (argument_list . (string (string_content) @name))
        block: (do_block body: (body_statement)? @body)) @definition.function
    ])
  (#match? @_verb "^(get|post|put|patch|delete|head|options)$")
)

; f(x), obj.f(x), obj.f x
(call method: (identifier) @name) @reference.call
