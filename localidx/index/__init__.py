"""The indexing pass (the single writer) and what reports on it."""
