"""Serving: gunicorn with our worker and hooks, announcing the archive to the resolver."""
