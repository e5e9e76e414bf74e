"""``python -m calibrate.live``: see :mod:`calibrate.live`."""

import sys

from .run import main

if __name__ == "__main__":
    sys.exit(main())
