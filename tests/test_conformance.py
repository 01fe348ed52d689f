"""Conformance to the letter of seed 000 over real HTTP (`archive-service serve` on loopback):
the seed's own example messages sent verbatim, CriarParURL's rule that the verb list prevails
over the file path, and the Archive's own service answering as an identified item."""

from __future__ import annotations

import re
import shutil
import urllib.error
import urllib.request
from html.parser import HTMLParser

import pytest

from archive_service.protocol import answers, pairs
from serve_process import Serve
from support import (
    ADDRESS,
    EXAMPLE_8_1,
    EXAMPLE_8_2_SECOND,
    PLATFORM,
    SAMPLE,
    SERVICE,
    Client,
    assert_answer,
)

CONTACT = "admin@example.org"
ITEM = "iconet.com.br/banon/2009/09.09.22.01"  # LK47B6W/362SFKH: @relatorio.pdf, reference.bib


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    process = Serve(
        tmp_path_factory.mktemp("conformance"),
        "--workers",
        "1",
        "--archiveadmemailaddress",
        CONTACT,
    )
    try:
        process.wait_answering()
        yield process
    finally:
        process.kill()


def get(url: str, headers: dict | None = None) -> tuple[int, str, str]:
    """(status, content type, body) of a GET with the URL exactly as given."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers["Content-Type"], error.read().decode()


def ask(serve: Serve, query: str, status: int = 200) -> str:
    got, content_type, body = get(f"{serve.url}?{query}")
    assert (got, content_type.split(";")[0]) == (status, "text/plain"), body
    return body


def answer(serve: Serve, query: str) -> dict[str, str]:
    return dict(pairs.parse(ask(serve, query)))


def url_request(ibi: str, **extra: str) -> str:
    query = (
        "servicesubject=urlRequest&clientinformation.ipaddress=150.163.2.175"
        f"&parsedibiurl.ibi={ibi}"
    )
    return query + "".join(f"&parsedibiurl.{name}={value}" for name, value in extra.items())


def as_seed(serve: Serve, body: str) -> str:
    """The body as the seed's Archive (mtc-m16c.sid.inpe.br) would write it."""
    return body.replace(serve.address, ADDRESS)


def without_urlkey(answer: dict[str, str]) -> dict[str, str]:
    return {n: v for n, v in answer.items() if n != "urlkey"}


# ------------------------------------------------- the seed's example messages, verbatim


@pytest.mark.process
def test_example_4_1_url_request(serve):
    body = ask(
        serve,
        "servicesubject=urlRequest&clientinformation.ipaddress=150.163.2.175"
        "&parsedibiurl.ibi=8JMKD3MGP7W/3EPGUE5",
    )
    got = dict(pairs.parse(body))
    # Example 4.2's answer, but for this Archive's address and services and the sample's
    # UTF-8 file name (the seed's was Latin-1, %f3).
    assert got["ibi"] == "{rep sid.inpe.br/mtc-m19/2013/09.04.12.27.57 ibip 8JMKD3MGP7W/3EPGUE5}"
    assert (got["state"], got["contenttype"], got["timestamp"]) == (
        "Original",
        "Data",
        "2013-10-04T14:32:14Z",
    )
    assert got["url"] == (
        f"http://{serve.address}/col/sid.inpe.br/mtc-m19/2013/09.04.12.27.57/"
        "doc/Relat%C3%B3rio%20Final.pdf"
    )


@pytest.mark.process
def test_example_5_4_inclusion_confirmation(serve):
    assert ask(serve, "servicesubject=inclusionConfirmationRequest") == "confirmation yes"


@pytest.mark.parametrize(
    "name, verbs, relation, want",
    [
        ("7.3", "GetTranslation", ".translation(pt)", "/2009/08.25.19.43/doc/RTC-07.pdf"),
        ("7.4", "", "", "/2013/09.04.12.27.57/doc/Relat%C3%B3rio%20Final.pdf"),
        (
            "7.6",
            "GetLastEdition",
            ".lastedition",
            "/2013/09.04.12.27.57/doc/Relat%C3%B3rio%20Final.pdf",
        ),
        ("7.8", "GetMetadata", ".metadata", "/2013/09.04.12.27.58/doc/metadata.html"),
        ("7.10", "GetMetadata", ".metadata", "/2013/09.04.12.27.58/doc/metadata.html"),
    ],
)
@pytest.mark.process
def test_examples_7_3_to_7_10_each_relation_the_verbs_name(serve, name, verbs, relation, want):
    ibi = "8JMKD3MGP8W/35MME4E" if name == "7.3" else "8JMKD3MGP7W/3EPGUE5"
    got = answer(serve, url_request(ibi, **({"verblist": verbs} if verbs else {})))
    assert got["url" + relation].endswith(want)
    assert got["state" + relation] == "Original"  # Example 7.4
    if name == "7.6":
        assert got["ibi.lastedition"] == (
            "{rep sid.inpe.br/mtc-m19/2013/09.04.12.27.57 ibip 8JMKD3MGP7W/3EPGUE5}"
        )
    if name in ("7.8", "7.10"):
        assert got["ibi.metadata"] == "{rep sid.inpe.br/mtc-m19/2013/09.04.12.27.58}"


@pytest.mark.process
def test_example_7_9_the_items_target(serve):
    got = answer(serve, url_request("LK47B6W/362SFKH"))
    assert got["url"] == f"http://{serve.address}/col/{ITEM}/doc/@relatorio.pdf"


@pytest.mark.process
def test_example_7_11_filepath_as_the_seed_sends_it_without_a_slash(serve):
    """Example 7.11 sends `reference.bib`; Table 6.9 asks for a path-absolute. Both are read
    as the file reference.bib of the item."""
    want = f"http://{serve.address}/col/{ITEM}/doc/reference.bib"
    for filepath in ("reference.bib", "/reference.bib"):
        got = answer(serve, url_request("LK47B6W/362SFKH", filepath=filepath))
        assert got["url"] == want, filepath
    assert get(want)[0] == 200
    nested = answer(serve, url_request("LK47B6W/362SFKH", filepath="./reference.bib"))
    assert nested["url"] == want


@pytest.mark.process
def test_example_7_12_get_file_list(serve):
    got = answer(serve, url_request("LK47B6W/362SFKH", verblist="GetFileList"))
    assert got["url"] == f"http://{serve.address}/{SERVICE}/filelist/{ITEM}"
    status, content_type, page = get(got["url"])
    assert status == 200 and "reference.bib" in page


@pytest.mark.process
def test_example_8_1_url_request_and_acknowledgment(serve):
    body = ask(
        serve,
        "clientinformation.ipaddress=172.16.44.200%20150.163.68.1"
        "&parsedibiurl.ibi=8JMKD3MGP8W/35MMLL8&servicesubject=urlRequest",
    )
    assert_answer(as_seed(serve, body), EXAMPLE_8_1)
    notice = ask(
        serve,
        (
            "clientinformation.ipaddress=172.16.44.200%20150.163.68.1&contenttype=Data"
            "&ibi=rep%20sid.inpe.br/mtc-m18@80/2009/07.21.14.43%20ibip%208JMKD3MGP8W/35MMLL8"
            "&servicesubject=acknowledgment&state=Original"
            "&url=http://mtc-m16c.sid.inpe.br/col/sid.inpe.br/mtc-m18@80/2009/07.21.14.43/doc/"
            "CCSDS%20650.0-B-1.pdf&url.persistent=http://urlib.net:80/8JMKD3MGP8W/35MMLL8"
            "&urlkey=1427244889-5349022633744855"
        ),
    )
    assert notice == "notice {acknowledgment received}"


@pytest.mark.process
def test_example_8_2_both_messages(serve):
    first = answer(
        serve,
        "clientinformation.ipaddress=172.16.44.200%20150.163.68.1"
        "&parsedibiurl.ibi=8JMKD3MGP8W/35MMLL8"
        "&parsedibiurl.verblist=GetLastEdition%20GetMetadata(oai_dc)"
        "&servicesubject=urlRequest",
    )
    assert first["ibi.nextedition"] == "{rep sid.inpe.br/mtc-m18/2012/07.12.18.08}"
    body = ask(
        serve,
        "clientinformation.ipaddress=172.16.44.200%20150.163.68.1"
        "&parsedibiurl.ibi=sid.inpe.br/mtc-m18/2012/07.12.18.08"
        "&parsedibiurl.verblist=GetLastEdition%20GetMetadata(oai_dc)"
        "&servicesubject=urlRequest",
    )
    assert_answer(as_seed(serve, body), EXAMPLE_8_2_SECOND)


# ------------------------------------------------------ a verb list joined by "+" (Table 6.4)


@pytest.mark.parametrize(
    "verblist",
    [
        "GetLastEdition%2BGetMetadata(oai_dc)",  # Table 6.4's "+", percent-encoded: a literal +
        "GetLastEdition+GetMetadata(oai_dc)",  # "+" in a query string is already a blank
        "GetLastEdition%20GetMetadata(oai_dc)",  # Example 8.2
        "%20GetLastEdition%2B%2BGetMetadata(oai_dc)%2B",
    ],
)
@pytest.mark.process
def test_a_verb_list_joined_by_plus_or_blanks_means_the_same(serve, verblist):
    got = answer(serve, url_request("sid.inpe.br/mtc-m18/2012/07.12.18.08", verblist=verblist))
    assert got["url.lastedition.metadata(oai_dc)"].endswith("/2012/07.12.18.08.49/doc/oai_dc.xml")
    plain = answer(
        serve,
        url_request(
            "sid.inpe.br/mtc-m18/2012/07.12.18.08", verblist="GetLastEdition%20GetMetadata(oai_dc)"
        ),
    )
    assert without_urlkey(got) == without_urlkey(plain)


@pytest.mark.parametrize(
    "extra, reason",
    [
        ({"verblist": "GetLastEdition%2BGetEverything"}, "unknown verb GetEverything"),
        ({"verblist": "GetMetadata%2BGetLastEdition"}, "verb order names no relation"),
        ({"verblist": "GetLastEdition,GetMetadata"}, "unknown verb"),
        ({"filepath": "../item.yaml"}, "leaves the item"),
        ({"filepath": "doc%5c..%5c..%5citem.yaml"}, "NUL or a backslash"),
        ({"filepath": "/x.pdf", "verblist": "GetTranslation%2BGetNothing"}, "unknown verb"),
        ({"filepath": "../../x", "verblist": "GetTranslation"}, "leaves the item"),
    ],
)
@pytest.mark.process
def test_what_is_truly_malformed_is_still_400(serve, extra, reason):
    body = ask(serve, url_request("LK47B6W/362SFKH", **extra), status=400)
    [(name, value)] = pairs.parse(body)
    assert name == "error" and reason in value


# ---------------------------------------------- CriarParURL: the verb list prevails (§7)


@pytest.mark.parametrize(
    "verbs, relation",
    [
        ("GetTranslation", ".translation(en)"),
        ("GetTranslation", ".translation(pt)"),
        ("GetTranslation(pt)", ".translation(pt)"),
        ("GetMetadata", ".metadata"),
        ("GetMetadata(oai_dc)", ".metadata(oai_dc)"),
        ("GetLastEdition", ".lastedition"),
        ("GetMetadata%20GetTranslation", ".metadata.translation"),
    ],
)
@pytest.mark.process
def test_with_verbs_the_file_path_is_ignored(serve, verbs, relation):
    """Seed 000 §7, CriarParURL: with both variables given "deve prevalecer a segunda": the
    URL is ⟨r,i,z⟩₃, which without GetFileList is simply ⟨r,i⟩₁."""
    ibi = "8JMKD3MGP8W/35MME4E"
    alone = answer(serve, url_request(ibi, verblist=verbs))
    for filepath in ("/x.pdf", "/CCSDS%20643.0-B-1.pdf", "x.pdf"):
        got = answer(serve, url_request(ibi, verblist=verbs, filepath=filepath))
        assert got["url" + relation] == alone["url" + relation], filepath
        assert without_urlkey(got) == without_urlkey(alone), filepath


@pytest.mark.process
def test_a_file_of_the_item_is_ignored_too_when_verbs_are_given(serve):
    """reference.bib is a file of the item: with GetLastEdition the last edition's own URL
    (its target, Example 7.9) is still the answer, not that file."""
    got = answer(
        serve, url_request("LK47B6W/362SFKH", verblist="GetLastEdition", filepath="/reference.bib")
    )
    assert got["url.lastedition"] == f"http://{serve.address}/col/{ITEM}/doc/@relatorio.pdf"


@pytest.mark.process
def test_get_file_list_with_a_file_path_gives_the_file_list(serve):
    for verbs in ("GetFileList", "GetLastEdition%20GetFileList"):
        got = answer(
            serve, url_request("LK47B6W/362SFKH", verblist=verbs, filepath="/reference.bib")
        )
        relation = ".lastedition" if "GetLastEdition" in verbs else ""
        assert got["url" + relation] == f"http://{serve.address}/{SERVICE}/filelist/{ITEM}"


@pytest.mark.process
def test_a_blank_verb_list_is_no_verb_list(serve):
    """`parsedibiurl.verblist=+` decodes to a blank: no verb is given, so the file path
    counts (⟨r,i,y⟩₂)."""
    for verblist in ("", "+", "%20", "%2B"):
        got = answer(
            serve, url_request("LK47B6W/362SFKH", verblist=verblist, filepath="/reference.bib")
        )
        assert got["url"] == f"http://{serve.address}/col/{ITEM}/doc/reference.bib", verblist


# ------------------------------------------- the Archive's own service is an identified item


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def page_text(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    return " ".join(" ".join(parser.parts).split())


@pytest.mark.process
def test_the_service_ibi_gets_a_full_answer(serve):
    """§7.1: each Archive makes its own service an identified item held as an intransferable
    original; the sample collection has no directory for it."""
    assert not (SAMPLE / SERVICE).exists()
    body = ask(serve, url_request(SERVICE))
    assert body == pairs.render(pairs.parse(body))
    got = dict(pairs.parse(body))
    assert got["ibi"] == f"{{rep {SERVICE}}}"
    assert got["ibi.archiveservice"] == f"{{rep {SERVICE}}}"
    assert (got["state"], got["contenttype"]) == ("Original", "Data")
    # The time of the software that answers: this test's process reads the same files.
    assert got["timestamp"] == answers.software_time().isoformat()[:19] + "Z"
    assert re.fullmatch(r"[0-9]{10,}-[0-9]{10,}", got["urlkey"])
    assert got["url"] == f"http://{serve.address}/{SERVICE}/about"
    # Found by its IBI in any case, like every item.
    assert answer(serve, url_request(SERVICE.upper()))["url"] == got["url"]


@pytest.mark.process
def test_the_service_page_says_what_the_service_is(serve):
    url = answer(serve, url_request(SERVICE))["url"]
    status, content_type, html = get(url)
    assert (status, content_type.split(";")[0]) == (200, "text/html")
    text = page_text(html)
    for fact in (SERVICE, serve.address, PLATFORM, CONTACT, "15 items", "Archive service"):
        assert fact in text, fact
    assert "archive-service" in text  # the software that answers


@pytest.mark.process
def test_the_service_answers_its_relations_like_any_item(serve):
    got = answer(serve, url_request(SERVICE, verblist="GetLastEdition"))
    assert got["url.lastedition"] == f"http://{serve.address}/{SERVICE}/about"
    assert got["state.lastedition"] == "Original"
    # No file list and no metadata are known for it: no URL, as for any item without them.
    assert "url" not in answer(serve, url_request(SERVICE, verblist="GetFileList"))
    assert "url.metadata" not in answer(serve, url_request(SERVICE, verblist="GetMetadata"))
    assert "url" not in answer(serve, url_request(SERVICE, filepath="/x.pdf"))


@pytest.mark.process
def test_the_service_url_comes_from_archiveaddress_not_the_host_header(serve):
    status, _, body = get(
        f"{serve.url}?{url_request(SERVICE)}", headers={"Host": "evil.example.com"}
    )
    assert status == 200 and "evil" not in body
    assert dict(pairs.parse(body))["url"] == f"http://{serve.address}/{SERVICE}/about"
    status, _, html = get(
        f"http://{serve.address}/{SERVICE}/about", headers={"Host": "evil.example.com"}
    )
    assert status == 200 and "evil" not in html


def test_the_service_url_keeps_the_mount_point(client: Client):
    """Under a WSGI mount point (SCRIPT_NAME) the page is where the service is."""
    got = dict(pairs.parse(client.url_request(SERVICE).text))
    assert got["url"] == f"http://{ADDRESS}{client.mount}/{SERVICE}/about"
    assert client.get_url(got["url"]).content_type == "text/html"


def test_the_service_page_where_a_server_mounts_the_app_at_the_service_path(settings):
    """mod_wsgi's WSGIScriptAlias of /<archiveserviceibi> (SCRIPT_NAME is the service path)."""
    import webtest
    from werkzeug.exceptions import NotFound
    from werkzeug.middleware.dispatcher import DispatcherMiddleware

    from archive_service.web import create_app

    test = webtest.TestApp(DispatcherMiddleware(NotFound(), {f"/{SERVICE}": create_app(settings)}))
    got = dict(
        pairs.parse(
            test.get(
                f"/{SERVICE}",
                params={
                    "servicesubject": "urlRequest",
                    "clientinformation.ipaddress": "1.2.3.4",
                    "parsedibiurl.ibi": SERVICE,
                },
            ).text
        )
    )
    assert got["url"] == f"http://{ADDRESS}/{SERVICE}/about"
    assert SERVICE in test.get(f"/{SERVICE}/about").text


@pytest.mark.process
def test_a_directory_for_the_service_still_wins(tmp_path):
    collection = tmp_path / "collection"
    shutil.copytree(SAMPLE, collection, symlinks=True)
    doc = collection / SERVICE / "doc"
    doc.mkdir(parents=True)
    (doc / "index.html").write_text("<p>our own page about the service</p>")
    (collection / SERVICE / "item.yaml").write_text(
        "state: Copy\ntimestamp: '2008-03-17T15:17:00Z'\n"
    )
    process = Serve(tmp_path, "--workers", "1", config=collection / "archive-service.yaml")
    try:
        process.wait_answering()
        got = answer(process, url_request(SERVICE))
        assert got["url"] == f"http://{process.address}/col/{SERVICE}/doc/index.html"
        assert (got["state"], got["timestamp"]) == ("Copy", "2008-03-17T15:17:00Z")
    finally:
        process.kill()
