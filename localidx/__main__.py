"""``python -m localidx`` runs the CLI.

``-m`` puts the current directory first on ``sys.path``; localidx runs inside arbitrary repositories (the git hooks run
it from the work tree's top), and a repository with its own ``json/``, ``tomllib/`` or ``click/`` package would
otherwise be imported in place of the real one. The package itself is already imported by now, so dropping that
entry loses nothing.
"""

import os
import sys

if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from localidx.interface.entry import main  # noqa: E402

main()
