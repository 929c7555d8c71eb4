"""python -m r2sp.run: r2sp-run."""

import sys

from . import main

sys.exit(main())
