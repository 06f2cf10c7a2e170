import sys

from optcc_app.cli import main

sys.exit(main())
