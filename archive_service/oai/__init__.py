"""The Archive as an OAI-PMH 2.0 data provider (issue 33): the protocol (`provider`), its
resumption tokens (`tokens`) and records (`records`). No web framework here: web/oai.py
routes requests to `provider.Provider`; the index keeps what it lists (index/oai.py)."""
