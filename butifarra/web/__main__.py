"""``python -m butifarra.web [options]``: the same as ``butifarra serve [options]``."""

import sys

from butifarra.web.serve import main

sys.exit(main())
