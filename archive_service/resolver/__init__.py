"""A reference resolver (SPEC §5, §6): a registry of Archives and persistent-URL resolution.

`archive-service resolver serve` runs it for institutions that cannot rely on urlib.net, and
the end-to-end tests use it to prove the Archive service against a real resolver. Protocol
logic (`purl`, `resolve`, `registry`) has no web framework in it; `app` is the Flask layer.
"""
