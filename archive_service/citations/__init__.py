"""Citation metadata of an item, in the formats the scholarly web reads: CSL-JSON, BibTeX,
RIS, schema.org JSON-LD, Highwire `citation_*` tags and formatted references (citeproc-py).

No web framework and no storage: each format is made from a `Work` (work.py), the facts of
one item the web layer gathers (its URLs, its files). The one table of item types is types.py.
"""
