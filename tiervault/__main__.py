"""``python -m tiervault``."""

import sys

from tiervault.cli import main

sys.exit(main())
