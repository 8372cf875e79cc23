"""One module per `evo` subcommand (see evo/cli.py)."""
