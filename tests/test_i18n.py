"""The pages in English and Brazilian Portuguese (issue 32, point 7): every string Babel's
extractor finds has its pt-BR translation, compiled; Accept-Language chooses, a switch that
sticks (a cookie) wins over it; `lang`, `hreflang`, `Vary`; dates and sizes for the locale."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po

from archive_service.common import i18n
from archive_service.resolver.app import create_resolver_app
from archive_service.web import create_app
from support import ROOT, SERVICE, Client

CATALOG = Path(i18n.TRANSLATIONS) / "pt_BR" / "LC_MESSAGES"
KEYWORDS = {"_": None, "gettext": None, "ngettext": (1, 2), "lazy_gettext": None}
OPEN = "iconet.com.br/banon/2009/09.09.22.01"
PT = {"Accept-Language": "pt-BR,pt;q=0.9,en;q=0.5"}


def extracted(top: Path = ROOT) -> set[str]:
    """Every msgid (singular) babel.cfg's extraction finds, as `pybabel extract` would."""
    with open(top / "babel.cfg", encoding="utf-8") as cfg:
        method_map, options_map = parse_mapping_cfg(cfg)
    found = set()
    for _file, _line, message, _comments, _context in extract_from_dir(
        str(top), method_map, options_map, keywords={**KEYWORDS, "ngettext": (1, 2)}
    ):
        found.add(message[0] if isinstance(message, tuple) else message)
    return found


def untranslated(found: set[str], po_path: Path) -> list[str]:
    with open(po_path, "rb") as po:
        catalog = read_po(po)
    missing = []
    for msgid in sorted(found):
        message = catalog.get(msgid)
        strings = message.string if message else ""
        strings = strings if isinstance(strings, tuple) else (strings,)
        if message is None or message.fuzzy or not all(strings):
            missing.append(msgid)
    return missing


def test_every_string_on_the_pages_has_its_pt_br_translation():
    found = extracted()
    assert len(found) > 100 and "Items of the Archive" in found  # the templates were read
    assert "Not a persistent URL" in found  # and the Python (lazy_gettext)
    assert untranslated(found, CATALOG / "messages.po") == []


def test_a_new_string_without_translation_fails_the_check(tmp_path):
    """The check above is not vacuous: a template with one new `_()` string fails it."""
    (tmp_path / "babel.cfg").write_text((ROOT / "babel.cfg").read_text())
    templates = tmp_path / "archive_service" / "web" / "templates"
    templates.mkdir(parents=True)
    (templates / "new.html").write_text('{{ _("Items") }} {{ _("A string nobody translated") }}')
    assert untranslated(extracted(tmp_path), CATALOG / "messages.po") == [
        "A string nobody translated"
    ]


def test_the_compiled_catalog_is_the_po_file():
    """The .mo shipped (pip install, CGI, mod_wsgi need no build step) is not stale."""
    with open(CATALOG / "messages.po", "rb") as po, open(CATALOG / "messages.mo", "rb") as mo:
        source, compiled = read_po(po), read_mo(mo)

    def one(value) -> tuple:
        return tuple(value) if isinstance(value, list | tuple) else (value,)

    def pairs(catalog) -> dict:
        return {one(m.id)[0]: one(m.string) for m in catalog if m.id}

    assert pairs(m for m in source if not m.fuzzy) == pairs(compiled)


@pytest.fixture
def archive(settings) -> Client:
    return Client(create_app(settings), "")


def test_accept_language_chooses_the_page_language(archive):
    english = archive.get(f"/{SERVICE}/items")
    assert '<html lang="en">' in english.text and "Items of the Archive" in english.text
    portuguese = archive.get(f"/{SERVICE}/items", headers=PT)
    assert '<html lang="pt-BR">' in portuguese.text
    assert "Itens do Arquivo" in portuguese.text and "Buscar" in portuguese.text
    assert portuguese.headers["Content-Language"] == "pt-BR"
    vary = {v.strip() for v in portuguese.headers["Vary"].split(",")}
    assert {"Accept-Language", "Cookie"} <= vary
    # Any Portuguese is ours; a language we lack is English.
    assert '<html lang="pt-BR">' in archive.get("/", headers={"Accept-Language": "pt-PT"}).text
    assert '<html lang="en">' in archive.get("/", headers={"Accept-Language": "de"}).text


def test_the_switch_sticks_and_wins_over_accept_language(archive):
    page = archive.get(f"/{SERVICE}/about", headers=PT)
    switch = re.search(r'<a href="([^"]+)" hreflang="en" lang="en" rel="alternate">', page.text)
    assert switch, page.text[:2000]
    assert '<link rel="alternate" hreflang="pt-BR"' in page.text
    chosen = archive.test.get(switch.group(1).replace("&amp;", "&"), headers=PT)
    assert '<html lang="en">' in chosen.text
    assert "lang=en" in chosen.headers["Set-Cookie"]
    # Another page, still asking for Portuguese: the cookie wins.
    later = archive.get(f"/{SERVICE}/statistics", headers=PT)
    assert '<html lang="en">' in later.text and "Statistics of the Archive" in later.text
    back = archive.get(f"/{SERVICE}/items?lang=pt-BR")
    assert '<html lang="pt-BR">' in back.text
    assert '<html lang="pt-BR">' in archive.get("/").text


def test_the_switch_keeps_the_page_and_its_query(archive):
    page = archive.get(f"/{SERVICE}/items?q=banon")
    assert f'href="/{SERVICE}/items?q=banon&amp;lang=pt-BR" hreflang="pt-BR"' in page.text


def test_sizes_and_dates_for_the_locale(archive, collection):
    doc = collection / OPEN / "doc"
    (doc / "big.bin").write_bytes(b"\0" * 1_234_567)
    client = Client(create_app(archive.app.config["ARCHIVE_SERVICE"]), "")
    pt = client.get(f"/{SERVICE}/filelist/{OPEN}", headers=PT).text
    assert "1,2\u00a0MB" in pt and "Tamanho" in pt
    en = client.get(f"/{SERVICE}/filelist/{OPEN}").text
    assert "1.2\u00a0MB" in en
    items = client.get(f"/{SERVICE}/items?q=2009", headers=PT).text
    assert re.search(r"\d{1,2} de [a-z]{3}\. de 2009", items), items


def test_bytes_are_said_in_the_plural_of_the_language(archive, collection):
    """CLDR's short English unit is "byte" for any number: "10 byte" stood on the pages."""
    doc = collection / OPEN / "doc"
    (doc / "ten.bin").write_bytes(b"0123456789")
    (doc / "one.bin").write_bytes(b"1")
    client = Client(create_app(archive.app.config["ARCHIVE_SERVICE"]), "")
    said = (("10\u00a0bytes", "1\u00a0byte"),) * 2  # never apart at a line's end
    for headers, (ten, one) in zip(({}, PT), said, strict=True):
        page = client.get(f"/{SERVICE}/filelist/{OPEN}", headers=headers).html
        sizes = {d["value"]: d.get_text() for d in page.find_all("data")}
        assert (sizes["10"], sizes["1"]) == (ten, one), headers


def test_error_pages_are_translated(archive):
    page = archive.get("/no/such/page", headers=PT, status=404)
    assert '<html lang="pt-BR">' in page.text and "Não encontrado" in page.text
    assert page.content_type == "text/html"
    assert f'href="/{SERVICE}/about?lang=en" hreflang="en"' in page.text  # the way home
    assert "/no/such/page" not in page.text and 'rel="alternate" hreflang' not in page.text
    # The protocol's text/plain answers stay as they are.
    protocol = archive.get(f"/{SERVICE}", params={"servicesubject": "x"}, headers=PT, status=400)
    assert protocol.content_type == "text/plain"


def test_the_resolver_pages_in_portuguese(tmp_path):
    resolver = Client(create_resolver_app({"state_dir": str(tmp_path)}), "")
    home = resolver.get("/", headers=PT)
    assert '<html lang="pt-BR">' in home.text and "Resolvedor de IBI" in home.text
    alert = resolver.get("/not-an-ibi", headers=PT, status=400)
    assert "Não é uma URL persistente" in alert.text
    # The alert's switch goes home: the persistent URL's query is the item's.
    assert 'href="/?lang=en" hreflang="en"' in alert.text


def test_the_statistics_charts_label_days_and_months_for_the_locale(archive):
    en = archive.get(f"/{SERVICE}/statistics?month=2026-01").text
    pt = archive.get(f"/{SERVICE}/statistics?month=2026-01", headers=PT).text
    labels = re.compile(r'text-anchor="middle">([^<]+)<')
    assert labels.findall(en)[:2] == ["Jan 3", "Jan 10"] and "Jan ’26" in labels.findall(en)
    assert labels.findall(pt)[:2] == ["3 de jan.", "10 de jan."]
    assert labels.findall(pt)[-1] == "jan. de 2026"


def test_an_archive_made_for_cgi_translates(settings):
    """contrib's CGI program and mod_wsgi file make the app with refresh=False: templates
    compiled when first rendered, the same catalog."""
    create_app(settings)  # the index, as `archive-service index` would leave it
    cgi = Client(create_app(settings, refresh=False), "")
    assert "Itens do Arquivo" in cgi.get(f"/{SERVICE}/items", headers=PT).text
