"""What several parts share and nothing else: HTTP error helpers, file writing, YAML loading,
SQLite opening, starting our own Python processes."""
