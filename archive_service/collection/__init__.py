"""The collection on disk: sidecars and their updates, items, the walker, deposit and mint."""
