"""The stores layer: state that outlives a request, each store one interface with a SQLite
(or state-directory file) module, the default, and a PostgreSQL one (`database`: shared by
every node), and one `open_…` that chooses. Stores import `common`, `protocol` and
`settings` only; nothing below them (protocol/, common/) imports a store. ARCHITECTURE.md
"add a store backend" says which files a new backend touches."""
