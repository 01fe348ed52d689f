"""Bringing an existing repository in without moving its files (issue 21): each source
(a manifest, BagIt bags, an OAI-PMH data provider) yields `records.Record`s, and one function
applies them to the collection idempotently through a source-id → IBI mapping kept in the
state store."""
