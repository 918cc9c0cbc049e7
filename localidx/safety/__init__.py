"""Redaction, trust and private files: what keeps a user's secrets and settings theirs."""
