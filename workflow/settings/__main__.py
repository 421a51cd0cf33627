"""``python workflow/settings VERB``: the settings' command line (:func:`settings.cli.main`)."""

import os
import sys

# run as a directory, this package's own folder is first on the path: the folder above it
# instead, so that its modules are imported as the package ``settings`` (and shadow nothing)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [os.path.dirname(HERE)] + [p for p in sys.path if os.path.abspath(p or ".") != HERE]

from settings.cli import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
