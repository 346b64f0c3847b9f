"""`python -m maka`: the `maka` command line, as `python -m maka.cli`."""

import sys

from maka.cli import main

sys.exit(main())
