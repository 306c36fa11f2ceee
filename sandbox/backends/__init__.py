"""One module per sandbox backend, each registering its opener by name (sandbox/registry.py)."""
