import sys

from maka.cli import main

sys.exit(main())
