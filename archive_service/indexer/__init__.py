"""The indexing process: watching the collection, its supervisor in each worker, start-up."""
