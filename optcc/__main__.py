import sys

from optcc.cli import main

sys.exit(main())
