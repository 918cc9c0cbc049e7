"""The command line, its fast entry, the MCP server and the git hooks: where a user meets localidx."""
