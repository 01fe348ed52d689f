"""What an item is, in each vocabulary: its `dc:type` (else its contenttype) read as a
schema.org type, a CSL type, a BibTeX entry type and an RIS type. One table, one rule."""

from __future__ import annotations

from typing import NamedTuple


class Kind(NamedTuple):
    schema: str  # schema.org type (https://schema.org/<schema>)
    csl: str  # CSL 1.0.2 item type
    bibtex: str  # BibTeX entry type
    ris: str  # RIS TY


GENERIC = Kind("CreativeWork", "document", "misc", "GEN")

# The first row with a word found in the lower-cased type names the kind (English and
# Portuguese words; DCMI Type Vocabulary terms).
KINDS: tuple[tuple[tuple[str, ...], Kind], ...] = (
    (("metadata",), Kind("CreativeWork", "document", "misc", "GEN")),
    (
        ("thesis", "dissertation", "tese", "dissertação"),
        Kind("Thesis", "thesis", "phdthesis", "THES"),
    ),
    (
        ("conference", "proceedings", "congresso", "evento"),
        Kind("ScholarlyArticle", "paper-conference", "inproceedings", "CPAPER"),
    ),
    (
        ("article", "artigo", "paper"),
        Kind("ScholarlyArticle", "article-journal", "article", "JOUR"),
    ),
    (("report", "relatório", "standard", "norma"), Kind("Report", "report", "techreport", "RPRT")),
    (("book", "livro"), Kind("Book", "book", "book", "BOOK")),
    (("dataset", "data", "dados"), Kind("Dataset", "dataset", "misc", "DATA")),
    (("software", "program"), Kind("SoftwareSourceCode", "software", "misc", "COMP")),
    (
        ("movingimage", "moving image", "video", "vídeo"),
        Kind("VideoObject", "motion_picture", "misc", "VIDEO"),
    ),
    (("image", "imagem", "figure"), Kind("ImageObject", "graphic", "misc", "FIGURE")),
    (("sound", "audio", "áudio"), Kind("AudioObject", "song", "misc", "SOUND")),
)


def kind_of(type_name: str | None) -> Kind:
    """The kind a `dc:type` value (or contenttype) names; CreativeWork when none fits."""
    text = (type_name or "").lower()
    for words, kind in KINDS:
        if any(word in text for word in words):
            return kind
    return GENERIC
