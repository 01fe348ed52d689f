"""The three service subjects over WSGI, the URLs the Archive hands out, and the 400 contract."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import pytest

from archive_service.protocol import pairs
from archive_service.web import create_app
from support import ADDRESS, SERVICE, Client


def answer(response) -> dict[str, str]:
    assert response.content_type == "text/plain"
    return dict(pairs.parse(response.text))


def test_inclusion_confirmation(client: Client):
    response = client.service(servicesubject="inclusionConfirmationRequest")
    assert response.text == "confirmation yes"
    assert response.headers["Content-Type"].startswith("text/plain")


def test_acknowledgment(client: Client):
    response = client.service(
        servicesubject="acknowledgment",
        **{
            "clientinformation.ipaddress": "172.16.44.200 150.163.68.1",
            "contenttype": "Data",
            "ibi": "rep sid.inpe.br/mtc-m18@80/2009/07.21.14.43 ibip 8JMKD3MGP8W/35MMLL8",
            "state": "Original",
            "url": f"http://{ADDRESS}/col/sid.inpe.br/mtc-m18@80/2009/07.21.14.43/doc/x.pdf",
            "url.persistent": "http://urlib.net:80/8JMKD3MGP8W/35MMLL8",
            "urlkey": "1427244889-5349022633744855",
        },
    )
    assert response.text == "notice {acknowledgment received}"


def test_unknown_ibi_is_an_empty_answer_not_an_error(client: Client):
    response = client.url_request("8JMKD3MGP8W/22222")
    assert response.status_int == 200 and response.text == ""
    assert client.url_request("unknown.example/x/2020/01.01.00.00").text == ""


@pytest.mark.parametrize(
    "ibi",
    [
        "8jmkd3mgp8w/35mmll8",
        "8JMKD3MGP8W/35MMLL8",
        "SID.INPE.BR/MTC-M18@80/2009/07.21.14.43",
        "sid.inpe.br/mtc-m18@80/2009/07.21.14.43",
    ],
)
def test_both_forms_in_any_case_find_the_item(client: Client, ibi):
    got = answer(client.url_request(ibi))
    assert got["ibi"] == "{rep sid.inpe.br/mtc-m18@80/2009/07.21.14.43 ibip 8JMKD3MGP8W/35MMLL8}"


def test_deleted_item(client: Client):
    response = client.url_request("iconet.com.br/banon/2010/01.20.11.05")
    assert pairs.parse(response.text) == [
        ("archiveaddress", ADDRESS),
        ("ibi", "{rep iconet.com.br/banon/2010/01.20.11.05}"),
        ("ibi.archiveservice", "{rep sid.inpe.br/mtc-m18@80/2008/03.17.15.17}"),
        ("ibi.platformsoftware", "{rep dpi.inpe.br/banon/1998/08.02.08.56}"),
        ("state", "Deleted"),
        ("timestamp", "2015-03-02T09:15:00Z"),
    ]
    # Whatever the verbs, the resolver still learns that the item was removed.
    got = answer(client.url_request("iconet.com.br/banon/2010/01.20.11.05", verblist="GetMetadata"))
    assert got["state"] == "Deleted" and "url" not in got


def test_copy_item_and_its_default_target(client: Client):
    got = answer(client.url_request("dpi.inpe.br/banon/2003/12.10.19.30"))
    assert got["state"] == "Copy"
    assert got["url"].endswith("/col/dpi.inpe.br/banon/2003/12.10.19.30/doc/index.html")
    assert client.get_url(got["url"]).content_type == "text/html"


def test_filepath_names_a_file_of_the_item(client: Client):
    got = answer(client.url_request("LK47B6W/362SFKH", filepath="/reference.bib"))
    assert got["url"] == (
        f"http://{ADDRESS}{client.mount}/col/iconet.com.br/banon/2009/09.09.22.01/doc/reference.bib"
    )
    assert b"@" in client.get_url(got["url"]).body


def test_filepath_that_does_not_exist_gives_no_url(client: Client):
    got = answer(client.url_request("LK47B6W/362SFKH", filepath="/nothing.pdf"))
    assert "url" not in got and "urlkey" not in got and got["ibi"]


def test_target_with_an_at_sign_is_kept_as_is(client: Client):
    """Example 7.9: the target file @relatorio.pdf."""
    got = answer(client.url_request("LK47B6W/362SFKH"))
    assert got["url"].endswith("/col/iconet.com.br/banon/2009/09.09.22.01/doc/@relatorio.pdf")
    assert client.get_url(got["url"]).content_type == "application/pdf"


def test_get_file_list_public(client: Client):
    got = answer(
        client.url_request("LK47B6W/362SFKH", verblist="GetFileList", filepath="/reference.bib")
    )
    assert "/filelist/" in got["url"], "the verb list prevails over filepath (CriarParURL)"
    page = client.get_url(got["url"])
    assert page.content_type == "text/html"
    for name in ("@relatorio.pdf", "reference.bib"):
        link = page.html.find("a", string=name)
        assert link is not None, name
        assert client.get_url(link["href"]).status_int == 200
    assert "item.yaml" not in page.text


def test_get_file_list_private_says_so(client: Client):
    got = answer(client.url_request("iconet.com.br/banon/2011/06.14.16.40", verblist="GetFileList"))
    page = client.get_url(got["url"], status=403)
    assert "not public" in page.text
    assert "dados.csv" not in page.text


@pytest.mark.parametrize(
    "verbs, relation",
    [
        ("GetTranslation(pt)", ".translation(pt)"),
        ("GetTranslation(en)", ".translation(en)"),
        ("GetMetadata(oai_dc)", ".metadata(oai_dc)"),
        ("GetMetadata", ".metadata"),
        ("GetLastEdition", ".lastedition"),
        ("GetTranslation(pt) GetLastEdition", ".translation(pt).lastedition"),
        ("GetLastEdition GetTranslation(pt)", ".lastedition.translation(pt)"),
        ("GetMetadata GetTranslation", ".metadata.translation"),
    ],
)
def test_each_relation_keeps_only_its_pairs(client: Client, verbs, relation):
    got = answer(client.url_request("8JMKD3MGP8W/35MME4E", verblist=verbs))
    related = {
        n for n in got if "." in n and n not in ("ibi.archiveservice", "ibi.platformsoftware")
    }
    assert related == {p + relation for p in ("contenttype", "ibi", "state", "timestamp", "url")}


def test_get_translation_with_a_language(client: Client):
    got = answer(client.url_request("8JMKD3MGP8W/35MME4E", verblist="GetTranslation(pt)"))
    assert got["url.translation(pt)"].endswith("/2009/08.25.19.43/doc/RTC-07.pdf")
    assert client.get_url(got["url.translation(pt)"]).content_type == "application/pdf"
    # The Portuguese item knows its English original as a translation too.
    back = answer(
        client.url_request("sid.inpe.br/mtc-m18@80/2009/08.25.19.43", verblist="GetTranslation(en)")
    )
    assert back["ibi.translation(en)"] == "{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23}"


def test_a_translation_not_held_gives_no_pairs(client: Client):
    got = answer(client.url_request("8JMKD3MGP8W/35MME4E", verblist="GetTranslation(fr)"))
    assert sorted(got) == ["archiveaddress", "ibi", "ibi.archiveservice", "ibi.platformsoftware"]


def test_metadata_oai_dc_of_an_identified_metadata_item(client: Client):
    got = answer(client.url_request("8JMKD3MGP8W/35MME4E", verblist="GetMetadata(oai_dc)"))
    assert got["contenttype.metadata(oai_dc)"] == "Metadata"
    record = client.get_url(got["url.metadata(oai_dc)"])
    root = ET.fromstring(record.body)
    assert root.tag == "{http://www.openarchives.org/OAI/2.0/oai_dc/}dc"


def test_inline_dublin_core_metadata(client: Client):
    ibi = "iconet.com.br/banon/2012/03.05.08.15"
    free = answer(client.url_request(ibi, verblist="GetMetadata"))
    assert "ibi.metadata" not in free, "inline metadata is not an identified item"
    assert free["contenttype.metadata"] == "Metadata"
    page = client.get_url(free["url.metadata"])
    assert "Apresentação do sistema de resolução de IBI" in page.text
    oai = answer(client.url_request(ibi, verblist="GetMetadata(oai_dc)"))
    record = client.get_url(oai["url.metadata(oai_dc)"])
    assert record.content_type == "text/xml"
    root = ET.fromstring(record.body)
    assert root.tag == "{http://www.openarchives.org/OAI/2.0/oai_dc/}dc"
    dc = "{http://purl.org/dc/elements/1.1/}"
    assert [e.text for e in root.findall(dc + "creator")] == [
        "Banon, Gerald Jean Francis",
        "Banon, Lise Christine",
    ]
    assert root.find(dc + "title").text == "Apresentação do sistema de resolução de IBI"
    assert root.get("{http://www.w3.org/2001/XMLSchema-instance}schemaLocation").startswith(
        "http://www.openarchives.org/OAI/2.0/oai_dc/ "
    )


def test_licensed_item_outside_its_networks_gets_metadata(client: Client):
    ibi = "sid.inpe.br/mtc-m19/2014/02.11.10.05"
    inside = answer(client.url_request(ibi, ip="150.163.3.4 200.1.1.1"))
    assert inside["url"].endswith("/doc/article.pdf") and inside["contenttype"] == "Data"
    outside = answer(client.url_request(ibi, ip="200.1.1.1 150.163.3.4"))
    assert outside["url"].endswith("/02.11.10.05.30/doc/metadata.html")
    assert outside["contenttype"] == "Metadata"
    v6 = answer(client.url_request(ibi, ip="2001:12f0::1"))
    assert v6["contenttype"] == "Data"


def test_non_ascii_utf8_file_name(client: Client):
    got = answer(client.url_request("8JMKD3MGP7W/3EPGUE5"))
    assert got["url"].endswith("/doc/Relat%C3%B3rio%20Final.pdf")
    assert client.get_url(got["url"]).body.startswith(b"%PDF")


def test_non_ascii_latin1_file_name_keeps_its_bytes(collection, settings):
    """Example 4.2: a Latin-1 name is written %f3, and that URL serves the file."""
    doc = os.fsencode(collection / "sid.inpe.br/mtc-m19/2013/09.04.12.27.57/doc")
    os.rename(
        doc + "/Relat\xc3\xb3rio Final.pdf".encode("latin-1"), doc + b"/Relat\xf3rio Final.pdf"
    )
    (collection / "sid.inpe.br/mtc-m19/2013/09.04.12.27.57/item.yaml").write_text(
        "ibip: 8JMKD3MGP7W/3EPGUE5\nlanguage: pt\ntimestamp: '2013-10-04T14:32:14Z'\n"
    )
    client = Client(create_app(settings), "")
    got = answer(client.url_request("8JMKD3MGP7W/3EPGUE5"))
    assert got["url"].endswith("/doc/Relat%F3rio%20Final.pdf")
    assert client.get_url(got["url"]).body.startswith(b"%PDF")
    by_path = answer(
        client.test.get(
            f"/{SERVICE}?servicesubject=urlRequest&clientinformation.ipaddress=1.2.3.4"
            "&parsedibiurl.ibi=8JMKD3MGP7W/3EPGUE5&parsedibiurl.filepath=/Relat%f3rio%20Final.pdf"
        )
    )
    assert by_path["url"] == got["url"]


def test_files_have_type_conditional_get_and_range(client: Client):
    got = answer(client.url_request("8JMKD3MGP8W/35MMLL8"))
    full = client.get_url(got["url"])
    assert full.content_type == "application/pdf"
    etag, modified = full.headers["ETag"], full.headers["Last-Modified"]
    client.get_url(got["url"], headers={"If-None-Match": etag}, status=304)
    client.get_url(got["url"], headers={"If-Modified-Since": modified}, status=304)
    part = client.get_url(got["url"], headers={"Range": "bytes=0-3"}, status=206)
    assert part.body == b"%PDF" and part.headers["Content-Range"].startswith("bytes 0-3/")


@pytest.mark.parametrize(
    "header, status",
    [
        ("items=0-3", 200),  # a unit not understood: ignored (RFC 9110 14.2, a MUST)
        ("bytes=0-0,2-3", 200),  # several ranges (no multipart here): the whole file
        ("bytes=0-3,", 200),  # not a range set: ignored
        ("bytes=3-0", 200),
        ("bytes=0-3", 206),
        ("bytes=-4", 206),
        ("bytes=-99999999", 206),  # a suffix longer than the file: all of it (RFC 9110 14.1.2)
        ("bytes=99999999-", 416),  # one range past the end: not satisfiable
    ],
)
def test_a_range_header_that_is_not_one_bytes_range_is_ignored(client: Client, header, status):
    got = answer(client.url_request("8JMKD3MGP8W/35MMLL8"))
    whole = client.get_url(got["url"]).body
    served = client.get_url(got["url"], headers={"Range": header}, status=status)
    if status == 200:
        assert served.body == whole
    if header == "bytes=-99999999":
        assert served.body == whole
        assert served.headers["Content-Range"] == f"bytes 0-{len(whole) - 1}/{len(whole)}"


@pytest.mark.parametrize(
    "path",
    [
        "/col/iconet.com.br/banon/2009/09.09.22.01/item.yaml",
        "/col/iconet.com.br/banon/2009/09.09.22.01/doc/../item.yaml",
        "/col/iconet.com.br/banon/2009/09.09.22.01/doc/%2e%2e/item.yaml",
        "/col/iconet.com.br/banon/2009/09.09.22.01/doc/",
        "/col/iconet.com.br/banon/2009/09.09.22.01/doc/..%5citem.yaml",
        "/col/archive-service.yaml",
        "/col/iconet.com.br/banon/2010/01.20.11.05/doc/x",
    ],
)
def test_nothing_outside_an_items_doc_is_served(client: Client, path):
    client.get(path, status=404)


def test_symlinks_leaving_the_item_are_neither_served_nor_listed(collection, settings):
    doc = collection / "iconet.com.br/banon/2009/09.09.22.01/doc"
    (doc / "escape.yaml").symlink_to(collection / "archive-service.yaml")
    (doc / "loop").symlink_to(doc / "loop")
    (doc / "inside.bib").symlink_to(doc / "reference.bib")
    client = Client(create_app(settings), "")
    client.get("/col/iconet.com.br/banon/2009/09.09.22.01/doc/escape.yaml", status=404)
    client.get("/col/iconet.com.br/banon/2009/09.09.22.01/doc/loop", status=404)
    client.get("/col/iconet.com.br/banon/2009/09.09.22.01/doc/inside.bib", status=200)
    page = client.get(f"/{SERVICE}/filelist/iconet.com.br/banon/2009/09.09.22.01")
    assert "escape.yaml" not in page.text and "loop" not in page.text
    assert client.url_request("LK47B6W/362SFKH", filepath="/escape.yaml").text.count("url") == 0


def test_url_base_points_files_at_another_server(settings):
    settings["url_base"] = "https://files.example.org/collection/"
    client = Client(create_app(settings), "")
    got = answer(client.url_request("LK47B6W/362SFKH"))
    assert got["url"] == (
        "https://files.example.org/collection/iconet.com.br/banon/2009/"
        "09.09.22.01/doc/@relatorio.pdf"
    )


def test_urls_come_from_archiveaddress_not_the_host_header(client: Client):
    response = client.test.get(
        client.path("/" + SERVICE),
        params={
            "servicesubject": "urlRequest",
            "clientinformation.ipaddress": "150.163.2.175",
            "parsedibiurl.ibi": "LK47B6W/362SFKH",
        },
        headers={"Host": "evil.example.com"},
    )
    assert "evil" not in response.text
    assert f"http://{ADDRESS}{client.mount}/col/" in response.text


BAD_REQUESTS = [
    ({"parsedibiurl.ibi": "LK47B6W/362SFKH"}, "servicesubject is missing"),
    ({"servicesubject": "teleport"}, "unknown servicesubject"),
    (
        {"servicesubject": "urlRequest", "parsedibiurl.ibi": "LK47B6W/362SFKH"},
        "urlRequest needs clientinformation.ipaddress",
    ),
    (
        {"servicesubject": "urlRequest", "clientinformation.ipaddress": "1.2.3.4"},
        "urlRequest needs parsedibiurl.ibi",
    ),
    (
        {
            "servicesubject": "urlRequest",
            "clientinformation.ipaddress": "1.2.3.4",
            "parsedibiurl.ibi": "not/an/ibi",
        },
        "parsedibiurl.ibi is neither",
    ),
    (
        {
            "servicesubject": "urlRequest",
            "clientinformation.ipaddress": "1.2.3.4",
            "parsedibiurl.ibi": "LK47B6W/362SFKH0",
        },
        "parsedibiurl.ibi is neither",
    ),
    (
        {
            "servicesubject": "urlRequest",
            "clientinformation.ipaddress": "1.2.3.4",
            "parsedibiurl.ibi": "sid.inpe.br/mtc-m18/2012/13.12.18.08",
        },
        "parsedibiurl.ibi is neither",
    ),
    (
        {
            "servicesubject": "urlRequest",
            "clientinformation.ipaddress": "localhost",
            "parsedibiurl.ibi": "LK47B6W/362SFKH",
        },
        "clientinformation.ipaddress must be",
    ),
    (
        {
            "servicesubject": "urlRequest",
            "clientinformation.ipaddress": "1.2.3.4",
            "parsedibiurl.ibi": "LK47B6W/362SFKH",
            "parsedibiurl.verblist": "GetEverything",
        },
        "unknown verb GetEverything",
    ),
    (
        {
            "servicesubject": "urlRequest",
            "clientinformation.ipaddress": "1.2.3.4",
            "parsedibiurl.ibi": "LK47B6W/362SFKH",
            "parsedibiurl.verblist": "GetTranslation(pt-br)",
        },
        "unknown verb",
    ),
    (
        {
            "servicesubject": "urlRequest",
            "clientinformation.ipaddress": "1.2.3.4",
            "parsedibiurl.ibi": "LK47B6W/362SFKH",
            "parsedibiurl.verblist": "GetMetadata GetLastEdition",
        },
        "verb order names no relation",
    ),
    (
        {
            "servicesubject": "urlRequest",
            "clientinformation.ipaddress": "1.2.3.4",
            "parsedibiurl.ibi": "LK47B6W/362SFKH",
            "parsedibiurl.filepath": "/../../etc/passwd",
        },
        "leaves the item",
    ),
    (
        {
            "servicesubject": "urlRequest",
            "clientinformation.ipaddress": "1.2.3.4",
            "parsedibiurl.ibi": "LK47B6W/362SFKH",
            "parsedibiurl.filepath": "../reference.bib",
        },
        "leaves the item",
    ),
    (
        {
            "servicesubject": "urlRequest",
            "clientinformation.ipaddress": "1.2.3.4",
            "parsedibiurl.ibi": "LK47B6W/362SFKH",
            "parsedibiurl.filepath": "/a\\..\\b",
        },
        "NUL or a backslash",
    ),
    (
        {"servicesubject": "acknowledgment", "clientinformation.ipaddress": "1.2.3.4"},
        "acknowledgment needs contenttype",
    ),
    (
        {
            "servicesubject": "acknowledgment",
            "clientinformation.ipaddress": "1.2.3.4",
            "contenttype": "Data",
            "state": "Original",
            "url": "http://x/y",
            "url.persistent": "http://u/i",
            "urlkey": "12345",
        },
        "urlkey must be digits",
    ),
]


@pytest.mark.parametrize("params, reason", BAD_REQUESTS, ids=[r for _, r in BAD_REQUESTS])
def test_malformed_requests_get_400_with_a_pairs_error(client: Client, params, reason):
    response = client.service(status=400, **params)
    assert response.content_type == "text/plain"
    [(name, value)] = pairs.parse(response.text)
    assert name == "error" and value.startswith("{") and reason in value


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_the_service_url_opened_in_a_browser_is_the_archives_page(client: Client, method):
    """No query at all: a person, not a resolver (issue 34, point 6); any query stays the
    protocol's, answered as before (above)."""
    response = client.test.request(client.path(f"/{SERVICE}"), method=method, status=303)
    assert response.location.endswith(client.path(f"/{SERVICE}/about"))
    page = client.test.get(response.location, status=200)
    assert page.content_type == "text/html"
    assert client.test.get(client.path(f"/{SERVICE}?"), status=303)  # an empty query too


@pytest.mark.parametrize(
    "query, reason",
    [
        ("servicesubject=urlRequest&servicesubject=urlRequest", "given more than once"),
        (
            "servicesubject=urlRequest&clientinformation.ipaddress=1.2.3.4"
            "&parsedibiurl.ibi=LK47B6W/362SFKH&parsedibiurl.filepath=/%00x",
            "NUL",
        ),
        (
            "servicesubject=urlRequest&clientinformation.ipaddress=1.2.3.4"
            "&parsedibiurl.ibi=LK47B6W/362SFKH&parsedibiurl.filepath=/%2e%2e/x",
            "leaves the item",
        ),
    ],
)
def test_malformed_query_strings(client: Client, query, reason):
    response = client.test.get(client.path(f"/{SERVICE}?{query}"), status=400)
    assert reason in response.text


def test_query_string_percent_decoding_of_table_4_1(client: Client):
    """+ and %20 both separate verbs; %2B is a literal plus."""
    got = client.test.get(
        client.path(
            f"/{SERVICE}?servicesubject=urlRequest&clientinformation.ipaddress=172.16.44.200%20150.163.68.1"
            "&parsedibiurl.ibi=8JMKD3MGP8W/35MMLL8&parsedibiurl.verblist=GetLastEdition+GetMetadata(oai_dc)"
        )
    )
    assert "url.lastedition.metadata(oai_dc)" in got.text


@pytest.mark.parametrize("mount", [f"/{SERVICE}", "/col", "/archive/col"])
def test_a_server_may_mount_the_app_at_its_service_path_or_at_col(settings, mount):
    """mod_wsgi's WSGIScriptAlias or a proxy may set SCRIPT_NAME to the service path or /col."""
    import webtest
    from werkzeug.exceptions import NotFound
    from werkzeug.middleware.dispatcher import DispatcherMiddleware

    app = create_app(settings)
    prefix = mount.rsplit("/col", 1)[0] if mount.endswith("/col") else ""
    test = webtest.TestApp(DispatcherMiddleware(NotFound(), {mount: app}))
    if mount.endswith("/col"):
        test.get(f"{prefix}/col/iconet.com.br/banon/2009/09.09.22.01/doc/reference.bib", status=200)
    else:
        got = dict(
            pairs.parse(
                test.get(
                    f"/{SERVICE}",
                    params={
                        "servicesubject": "urlRequest",
                        "clientinformation.ipaddress": "1.2.3.4",
                        "parsedibiurl.ibi": "LK47B6W/362SFKH",
                        "parsedibiurl.verblist": "GetFileList",
                    },
                ).text
            )
        )
        assert got["url"] == (
            f"http://{ADDRESS}/{SERVICE}/filelist/iconet.com.br/banon/2009/09.09.22.01"
        )
        test.get(f"/{SERVICE}/filelist/iconet.com.br/banon/2009/09.09.22.01", status=200)


def test_the_root_page_says_what_this_is(client: Client):
    page = client.get("/")
    assert SERVICE in page.text and "It holds 15 items." in page.text
