"""One module per command (or command group); each registers itself on bot.cli_base.app."""
