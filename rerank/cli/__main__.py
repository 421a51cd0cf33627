"""``python -m rerank.cli``: the same as the ``rerank`` command."""

import sys

from rerank.cli import main

sys.exit(main())
