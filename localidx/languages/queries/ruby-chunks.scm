; Captures for chunking and [META] beyond the tags convention.

; The comment that opens a file describes it (not a shebang or a magic comment such as frozen_string_literal).
((program . (comment) @doc.module)
  (#not-match? @doc.module "^#(!|\\s*-\\*-|\\s*(frozen_string_literal|encoding|coding|warn_indent|shareable_constant_value):)"))

; require "json", require_relative "lib/x", load "tasks.rb"
(call
  method: (identifier) @_method
  arguments: (argument_list . (string))
  (#match? @_method "^(require|require_relative|load)$")) @import

; Sinatra: get "/plans/:name" do ... end
(call
  method: (identifier) @route.verb
  arguments: (argument_list . (string) @route.path)
  block: [(do_block) (block)]
  (#match? @route.verb "^(get|post|put|patch|delete|head|options)$")) @route

; Rails routes: get "/plans/:name", to: "plans#show"
(call
  method: (identifier) @route.verb
  arguments: (argument_list
    .
    (string) @route.path
    (pair
      key: (hash_key_symbol) @_to
      value: (string (string_content) @route.handler)))
  (#eq? @_to "to")
  (#match? @route.verb "^(get|post|put|patch|delete|match)$")) @route
