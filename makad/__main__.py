import sys

from makad.daemon import main

sys.exit(main())
