"""One module per `optcc` subcommand; each defines register(subparsers). See optcc/cli.py."""
