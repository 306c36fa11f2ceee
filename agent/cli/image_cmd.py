"""Commands registered on agent.cli.app (being written)."""
