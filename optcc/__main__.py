"""`python -m optcc`: an entry point only (nothing imports it); the command line is optcc_app.cli."""
import sys

from optcc_app.cli import main

sys.exit(main())
