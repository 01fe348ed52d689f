"""What several parts share and nothing else: HTTP error helpers, file writing, YAML loading."""
