"""``python -m localidx`` runs the CLI."""

from localidx.cli import main

main()
