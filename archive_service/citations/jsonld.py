"""schema.org JSON-LD (application/ld+json): the item, `@id` its persistent URL."""

from __future__ import annotations

from .work import Work, orcid_url


def jsonld(work: Work) -> dict:
    record: dict = {
        "@context": "https://schema.org",
        "@type": work.kind.schema,
        "@id": work.cite_as,
        "url": work.landing,
        "identifier": [work.cite_as, work.ibi],
        "name": work.title,
    }
    if work.creators:
        record["author"] = [_person(c.name, c.url) for c in work.creators]
    for key, value in (
        ("datePublished", work.date),
        ("description", work.description),
        ("inLanguage", work.language),
        ("license", work.license_url or work.rights),
    ):
        if value:
            record[key] = value
    if work.subjects:
        record["keywords"] = list(work.subjects)
    if work.publisher:
        record["publisher"] = {"@type": "Organization", "name": work.publisher}
    parts = [
        {
            "@type": "MediaObject",
            "contentUrl": f.url,
            "name": f.name,
            "encodingFormat": f.mediatype,
            "contentSize": str(f.size),
        }
        for f in work.files
    ]
    if parts:
        # A Dataset has distributions; every other CreativeWork encodings.
        if work.kind.schema == "Dataset":
            record["distribution"] = [{**p, "@type": "DataDownload"} for p in parts]
        else:
            record["encoding"] = parts
    if work.removed is not None:
        record["creativeWorkStatus"] = "Deleted"
    return record


def _person(name: str, url: str | None) -> dict:
    person: dict = {"@type": "Person", "name": name}
    if url:
        person["@id" if orcid_url(url) else "url"] = orcid_url(url) or url
    return person
