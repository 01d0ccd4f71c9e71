"""`python -m bot` is `tacit`."""

from bot.cli import main

main()
