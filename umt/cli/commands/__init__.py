"""One module per command or command group."""
