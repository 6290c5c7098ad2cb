"""``python -m tiervault.cli``."""

import sys

from tiervault.cli import main

sys.exit(main())
