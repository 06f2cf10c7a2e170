"""One module per `optcc` subcommand; each defines register(subparsers). See optcc_app/cli.py."""
