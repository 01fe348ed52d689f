"""The one table of verbs (protocol/verbs.py) and the one language tag (protocol/language.py):
the Archive's answers, the resolver's persistent URLs and its questions all read them."""

from __future__ import annotations

from pathlib import Path

import pytest

from archive_service.collection import items as index
from archive_service.collection import sidecar
from archive_service.protocol import pairs, requests, verbs
from archive_service.protocol.answers import Archive, Links, Node, Step
from archive_service.protocol.language import language_tag
from archive_service.resolver import purl, resolve
from support import ADDRESS, PLATFORM, SERVICE

ITEM = "8JMKD3MGP8W/35MMLL8"  # the sample's item of Example 8.1


def test_an_unknown_step_is_an_error_never_getmetadata():
    """resolve.verb_of turned any step it did not know into GetMetadata: a question asked
    for the metadata of an item when it meant something else."""
    with pytest.raises(LookupError):
        resolve.Question(ITEM, (Step("x"),)).verblist  # noqa: B018


def test_the_archive_follows_no_step_it_does_not_know(collection: Path):
    """Archive.step took every step but u and t for the metadata."""
    citation = verbs.Verb("GetCitation", "c", ".citation")
    archive = Archive(index.scan(collection), ADDRESS, SERVICE, resolve_file=index.resolve_file)
    with pytest.raises(verbs.UnknownStep):
        archive.step(Node(item=archive.lookup(ITEM)), Step(citation))


@pytest.mark.parametrize("tag", ["PT-BR", "pt-br", "Pt"])
def test_an_answers_translation_is_read_as_the_standard_writes_its_language(tag):
    """Table A.1: `idioma = 2ALFAMI`, `pais = 2ALFAMA`. The Archive's filter and the persistent
    URL held to it, but the resolver took `.translation(PT-BR)` in an answer for a
    translation (its own `[A-Za-z]` copy of the rule): now no qualifier of Table 7.5."""
    relation = purl.parse(ITEM + "+").parsed.relation
    pairs_ = {"ibi": ITEM, f"url.translation({tag})": "http://a.example/x"}
    assert resolve.best_match(pairs_, relation, resolve.preferences("pt-BR")) is None
    pairs_ = {"ibi": ITEM, "url.translation(pt-BR)": "http://a.example/x"}
    assert resolve.best_match(pairs_, relation, ()).languages == ("pt-BR",)


def test_the_language_tag_as_written_and_in_any_case():
    assert language_tag("pt-BR") == "pt-BR"
    assert language_tag("pT-bR", any_case=True) == "pt-BR"
    for wrong in ("pt-br", "PT", "por", "pt_BR", ""):
        with pytest.raises(ValueError, match="is not lang"):
            language_tag(wrong)
    # IGNORECASE alone lets [a-z] match the Kelvin sign (U+212A) and the long s (U+017F).
    for wrong in ("\u212ao", "p\u017f", "pt-B"):
        with pytest.raises(ValueError, match="is not lang"):
            language_tag(wrong, any_case=True)


def test_a_sidecar_language_in_any_case_is_stored_as_the_standard_writes_it(tmp_path):
    side = tmp_path / "item.yaml"
    side.write_text("language: PT-br\ntranslations: {EN: a.example/b/2020/01.02.03.04}\n")
    assert sidecar.read(side).language == "pt-BR"
    assert list(sidecar.read(side).translations) == ["en"]
    side.write_text("language: portuguese\n")
    with pytest.raises(sidecar.SidecarError, match="is not lang"):
        sidecar.read(side)


# --------------------------------------------------------------- adding a verb, for real

# ARCHITECTURE.md "A new verb": one entry in the table (here a copy of it) plus its step.
CITATION = verbs.Verb(
    "GetCitation",
    "c",
    ".citation",
    "~",
    "bibtex|ris",
    "bibtex",
    "citation format {!r} is not offered; bibtex or ris",
)
TABLE = verbs.VERBS.with_verb(CITATION, r"(?:ut?|tu?)?(?:mt?)?c?")


class CitingArchive(Archive):
    """An Archive that follows the new step: to the item itself (its URL stands in)."""

    def _to_citation(self, node: Node, step: Step) -> list[tuple[str, Node]]:
        return [(step.qualifier(), node)] if node.item is not None else []

    FOLLOW = {**Archive.FOLLOW, "c": _to_citation}


def test_a_verb_added_to_the_table_is_taken_by_answers_purls_and_the_resolver(collection):
    archive = CitingArchive(
        index.scan(collection), ADDRESS, SERVICE, PLATFORM, resolve_file=index.resolve_file
    )
    links = Links(f"http://{ADDRESS}", "/" + SERVICE)
    ref = resolve.ArchiveRef(ADDRESS, SERVICE)

    # The persistent URL: as a modifier, after "!", and as a verb of ibiurl.verblist.
    parsed = purl.parse(ITEM + "!~(bibtex)", "", TABLE)
    assert parsed.verbs == ("GetLastEdition", "GetCitation(bibtex)")
    assert purl.parse(ITEM, "ibiurl.verblist=GetCitation(ris)", TABLE).verbs == (
        "GetCitation(ris)",
    )
    with pytest.raises(purl.PurlError, match="citation format 'csl' is not offered"):
        purl.parse(ITEM + "~(csl)", "", TABLE)
    with pytest.raises(purl.PurlError, match="not one of Table 6.2"):
        purl.parse(ITEM + "~!", "", TABLE)
    with pytest.raises(purl.PurlError, match="unknown verb GetCitation"):
        purl.parse(ITEM, "ibiurl.verblist=GetCitation(ris)")  # not in the real table

    def ask(question: resolve.Question) -> list[resolve.Answer]:
        request = requests.parse_url_request(question.params("150.163.2.175", None), TABLE)
        body = pairs.render(archive.answer_url_request(request, links))
        return [resolve.Answer.of(ref, pairs.parse(body))]

    purl_ = purl.parse(ITEM + "~(bibtex)", "", TABLE)
    assert resolve.Question(ITEM, purl_.parsed.relation).verblist == "GetCitation(bibtex)"
    outcome = resolve.resolve(purl_, ask)
    assert outcome.status == 302, outcome.reason
    assert outcome.reading.match.qualifier == ".citation(bibtex)"
    assert outcome.url.startswith(f"http://{ADDRESS}/col/")
