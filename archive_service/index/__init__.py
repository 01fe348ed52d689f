"""The persistent index: the SQLite store of the collection, its writer and its readers."""
