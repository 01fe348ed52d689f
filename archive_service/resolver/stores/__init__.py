"""The resolver's stores: its registry of Archives and the answered Archives it shares between
instances, each with one module per backend. Here, not in archive_service/stores/, because
the resolver builds on protocol, settings and common only (tests/test_layers.py): it runs
without the Archive's packages, and its stores come with it."""
