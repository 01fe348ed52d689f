"""The citation formats of an item (issue 32), without the web: the kind table, creators
with their ORCID, BibTeX values that bibtexparser reads back as written (hypothesis), and the
sizes pages show."""

from __future__ import annotations

import bibtexparser
import pytest
from hypothesis import given
from hypothesis import strategies as st

from archive_service.citations import apa, bibtex, styles
from archive_service.citations.types import kind_of
from archive_service.citations.work import Work, creator_of, orcid_url


@pytest.mark.parametrize(
    "name, schema",
    [
        ("Text", "CreativeWork"),
        ("", "CreativeWork"),
        ("Metadata", "CreativeWork"),  # holds "data": not a Dataset
        ("Dataset", "Dataset"),
        ("Conference paper", "ScholarlyArticle"),
        ("MovingImage", "VideoObject"),  # holds "image"
        ("StillImage", "ImageObject"),
        ("Tese de doutorado", "Thesis"),
    ],
)
def test_each_type_name_has_its_kind(name, schema):
    assert kind_of(name).schema == schema


def test_a_creator_may_carry_an_orcid_or_a_page():
    orcid = creator_of("Souza, Maria <https://orcid.org/0000-0002-1825-0097>")
    assert orcid.name == "Souza, Maria" and orcid.family_given == ("Souza", "Maria")
    assert orcid_url(orcid.url) == "https://orcid.org/0000-0002-1825-0097"
    page = creator_of("INPE (https://www.gov.br/inpe)")
    assert page.url == "https://www.gov.br/inpe" and orcid_url(page.url) is None
    assert creator_of("Instituto Nacional de Pesquisas Espaciais").family_given == (
        "Instituto Nacional de Pesquisas Espaciais",
        "",
    )


text = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1
).filter(lambda t: t.strip())


@given(title=text)
def test_bibtex_values_read_back_as_latex_escapes_of_what_was_written(title):
    work = Work(
        ibi="example.org/archive/2026/11.27.10.21",
        title=title,
        creators=(),
        date="2026",
        description=None,
        publisher=None,
        language=None,
        type_name="",
        rights=None,
        cite_as="http://urlib.net/example.org/archive/2026/11.27.10.21",
        landing="http://archive.example.org/x/item/example.org/archive/2026/11.27.10.21",
    )
    library = bibtexparser.parse_string(bibtex.bibtex(work))
    assert not library.failed_blocks
    (entry,) = library.entries
    assert entry["title"] == bibtex.escape(title)
    assert entry["year"] == "2026"


def work(**facts) -> Work:
    base = {
        "ibi": "example.org/archive/2026/11.27.10.21",
        "title": "Sistema de resolução",
        "creators": (creator_of("Banon, Gerald Jean-Paul"),),
        "date": "2012-07-12",
        "description": None,
        "publisher": None,
        "language": "pt-BR",
        "type_name": "",
        "rights": None,
        "cite_as": "http://urlib.net/example.org/archive/2026/11.27.10.21",
        "landing": "http://archive.example.org/x/item/example.org/archive/2026/11.27.10.21",
    }
    return Work(**{**base, **facts})


MANY = tuple(creator_of(f"Autor{n}, Nome{n} Meio") for n in range(23))


@pytest.mark.parametrize(
    "facts",
    [
        {},
        {"publisher": "INPE"},
        {"date": "2012"},
        {"date": "2012-05", "creators": MANY[:2]},
        {"creators": MANY[:3], "type_name": "Article", "publisher": "INPE"},
        {"creators": MANY, "type_name": "Dataset", "publisher": "INPE"},
        {"creators": MANY[:20], "type_name": "Report", "publisher": "INPE"},
        {"type_name": "Book", "publisher": "INPE"},
        {"type_name": "Software"},
        {"type_name": "StillImage"},
        {"type_name": "Conference paper", "publisher": "INPE"},
        {"creators": (creator_of("Instituto Nacional de Pesquisas Espaciais"),)},
    ],
)
@pytest.mark.parametrize(("language", "locale"), [("en", None), ("pt-BR", "pt-BR")])
def test_the_pages_apa_reference_is_citeproc_pys(facts, language, locale):
    """The landing page's fast APA writer and citeproc-py's APA style agree, in English
    and with citeproc-py's pt-BR CSL locale."""
    one = work(**facts)
    assert apa.apa(one, language) == styles.reference(one, "apa", locale)


def test_without_creators_or_date_the_apa_reference_still_reads_right():
    assert apa.apa(work(creators=(), date=None)) == (
        "Sistema de resolução. (n.d.). http://urlib.net/example.org/archive/2026/11.27.10.21"
    )
    assert apa.apa(work(creators=(), date=None), "pt-BR") == (
        "Sistema de resolução. (s.d.). http://urlib.net/example.org/archive/2026/11.27.10.21"
    )


@given(title=st.text(min_size=1).filter(str.strip), name=st.text(min_size=1).filter(str.strip))
def test_a_ris_export_is_one_record_whatever_line_breaks_the_metadata_holds(title, name):
    """A title or a creator holding `\\nER  - \\nTY  - JOUR` (a sidecar's, or a harvested
    record's) began a record of its own in the reference manager that imported it."""
    import rispy

    from archive_service.citations import ris

    made = work(title=title, creators=(creator_of(name),))
    (entry,) = rispy.loads(ris.ris(made))
    assert entry["title"] == " ".join(title.split())


def test_a_title_cannot_add_a_ris_record():
    import rispy

    from archive_service.citations import ris

    made = work(title="Real\nER  - \n\nTY  - JOUR\nTI  - Injected\nUR  - http://evil.example/")
    assert len(rispy.loads(ris.ris(made))) == 1


def test_a_bibtex_author_is_one_author_whatever_and_its_name_holds() -> None:
    """BibTeX splits its author list at the word `and`: a dc creator "Doe and Roe, John"
    (an organization's name, a typo, or a harvested record's) was two authors, Doe and
    "Roe, John", in every reference manager (issue 30, ninth adversarial pass, LOW)."""
    from bibtexparser.middlewares import SeparateCoAuthors

    names = ("Doe and Roe, John", "Smith, Ann AND Bob", "Sand, Anders")
    text = bibtex.bibtex(work(creators=tuple(creator_of(n) for n in names)))
    library = bibtexparser.parse_string(text, append_middleware=[SeparateCoAuthors()])
    (entry,) = library.entries
    assert len(entry["author"]) == 3, entry["author"]
    assert entry["author"][2] == "Sand, Anders"  # "and" inside a word splits nothing
