"""``python -m echomq``: the same as the ``echomq`` command."""

import sys

from .cli import main

sys.exit(main())
