"""``python -m edgert.cli``: the ``edgert`` command."""

import sys

from edgert.cli import main

sys.exit(main())
