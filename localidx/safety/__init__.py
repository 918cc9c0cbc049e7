"""Safety: what keeps a user's code, secrets and settings theirs, whatever a repository holds.

- ``redact``       secrets replaced before anything is chunked, stored, embedded, logged or explained, and the choke
                   point every text field of every chunk passes; ``secret_scan`` finds them (the patterns, the
                   secret names, the bounds on time)
- ``trust``        which repository config files the user has read and accepted, recorded outside every repository
- ``private``      directories 0700 and files 0600 for everything localidx writes about a user's code

Layer: just above the bottom (it imports ``lazylog`` only, and nothing else of the package); any layer may import it,
from ``config`` up to ``interface``.
"""
