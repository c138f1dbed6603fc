import sys

from spmdcheck.cli import main

sys.exit(main())
