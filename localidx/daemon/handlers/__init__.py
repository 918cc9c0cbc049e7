"""One module per protocol method; each exposes ``handle(daemon, params)``. ``routes.py`` maps names to them."""
