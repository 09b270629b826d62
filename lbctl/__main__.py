"""``python -m lbctl``: the same entry point as the ``lbctl`` console script."""

import sys

from lbctl.main import main

sys.exit(main())
