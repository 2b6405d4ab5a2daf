"""``python -m butifarra``: the same as the ``butifarra`` command."""

import sys

from butifarra.cli import main

sys.exit(main())
