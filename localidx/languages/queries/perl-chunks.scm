; Captures for chunking and [META] beyond the tags convention.

; The POD that opens a module describes it (=head1 NAME ...).
(source_file (pod) @doc.module)

[(use_statement) (require_expression)] @import
