; Bash definitions and calls, with the captures localidx adds: @body (its commands are split points) and @doc (the
; `#` comments just above). `name() { ... }` and `function name { ... }` are functions; each command run by name is
; a call (shell builtins and the usual utilities left out: they are no function of the repository).

((comment)* @doc
  .
  (function_definition
    name: (word) @name
    body: (compound_statement)? @body) @definition.function)

((command name: (command_name (word) @name)) @reference.call
  (#not-match? @name "^(\\.|:|\\[|echo|printf|local|export|return|exit|set|unset|shift|source|eval|exec|test|true|false|read|cd|pwd|command|type|builtin|declare|typeset|readonly|trap|wait|kill|sleep|cat|grep|sed|awk|tr|cut|head|tail|sort|uniq|wc|ls|mkdir|rm|cp|mv|ln|chmod|touch|find|xargs|basename|dirname|env|which)$"))
