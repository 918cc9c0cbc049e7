"""Text: the helpers every step shares for the text it reads and prints.

- ``safe``     text from outside made safe where it crosses an edge: valid to encode, printable on one line, fit
               for a terminal
- ``tokens``   cl100k token counts, offline
- ``words``    the words of identifiers, and the words too common to count ([META], the query side, highlighting)

Layer: the bottom, beside ``errors``, ``records`` and ``tomlfile``: it imports nothing of the package but
``tomlfile``, so any module may import it without running anything else of localidx.
"""
