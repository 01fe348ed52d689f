"""Hostile and broken requests: each is a 400 pairs error, an empty answer or a 404 — never a
500, never a file outside an item's doc/, never a URL built from what the request claims."""

from __future__ import annotations

import string

import pytest
import webtest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from archive_service.common import limits
from archive_service.protocol import pairs
from archive_service.web import create_app
from support import ADDRESS, SERVICE, Client

ITEM = "iconet.com.br/banon/2009/09.09.22.01"  # LK47B6W/362SFKH: reference.bib, @relatorio.pdf
BASE = (
    "servicesubject=urlRequest&clientinformation.ipaddress=1.2.3.4&parsedibiurl.ibi=LK47B6W/362SFKH"
)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Client:
    """One app over a collection with links out of an item and loops planted in it."""
    import shutil

    from support import SAMPLE

    root = tmp_path_factory.mktemp("hostile")
    collection = root / "collection"
    shutil.copytree(SAMPLE, collection, symlinks=True)
    (root / "secret.txt").write_text("outside the collection")
    doc = collection / ITEM / "doc"
    (doc / "out.txt").symlink_to(root / "secret.txt")
    (doc / "outdir").symlink_to(root)
    (doc / "rel-out").symlink_to("../../../../../../secret.txt")
    (doc / "sibling.pdf").symlink_to(
        collection / "sid.inpe.br/mtc-m19/2014/02.11.10.05/doc/article.pdf"
    )
    (doc / "loop").symlink_to(doc / "loop")
    (doc / "loop-a").symlink_to(doc / "loop-b")
    (doc / "loop-b").symlink_to(doc / "loop-a")
    app = create_app(
        {
            "collection": str(collection),
            "archiveaddress": ADDRESS,
            "archiveserviceibi": SERVICE,
            "resolver": "none",
            "state_dir": str(root / "state"),
        }
    )
    return Client(app, "")


def raw(client: Client, path: str, query: str = "", headers: dict | None = None):
    """A request with PATH_INFO and QUERY_STRING exactly as given (WSGI: latin-1 strings)."""
    request = webtest.TestRequest.blank("/", headers=headers or {})
    request.environ["PATH_INFO"] = path
    request.environ["QUERY_STRING"] = query
    return client.test.do_request(request, status="*")


def assert_error(response, status: int = 400, reason: str = "") -> str:
    assert response.status_int == status, response.text
    assert response.content_type == "text/plain"
    [(name, value)] = pairs.parse(response.text)
    assert name == "error" and value.startswith("{") and reason in value
    return value


def assert_no_url(response) -> None:
    assert response.status_int == 200
    got = dict(pairs.parse(response.text))
    assert "url" not in got and "urlkey" not in got


# --------------------------------------------------------------- parsedibiurl.filepath


@pytest.mark.parametrize(
    "filepath, reason",
    [
        ("/../../../../secret.txt", "leaves the item"),
        ("/%2e%2e/%2e%2e/x", "leaves the item"),
        ("/doc/../../item.yaml", "leaves the item"),
        ("/a/%2E%2E/%2E%2E/b", "leaves the item"),
        ("/..%5c..%5csecret.txt", "NUL or a backslash"),
        ("/%5cetc%5cpasswd", "NUL or a backslash"),
        ("/reference.bib%00.pdf", "NUL or a backslash"),
        ("../secret.txt", "leaves the item"),  # without a leading slash (Example 7.11) as well
        ("%5cetc%5cpasswd", "NUL or a backslash"),
    ],
)
def test_filepaths_leaving_the_item_are_400(hostile: Client, filepath, reason):
    assert_error(
        raw(hostile, f"/{SERVICE}", f"{BASE}&parsedibiurl.filepath={filepath}"), reason=reason
    )


@pytest.mark.parametrize(
    "filepath",
    [
        "/etc/passwd",
        "//etc/passwd",
        "///reference.bib/x",
        "/out.txt",
        "/outdir/secret.txt",
        "/rel-out",
        "/sibling.pdf",
        "/loop",
        "/loop-a",
        "/outdir",
        "/" + "a" * 300,
        "/" + "/".join(["d"] * 1500),
        "/%ff%fe",
        "/%ed%a0%80",
        "C:/x",
        "out.txt",
    ],
)
def test_filepaths_to_nothing_of_the_item_give_no_url(hostile: Client, filepath):
    assert_no_url(raw(hostile, f"/{SERVICE}", f"{BASE}&parsedibiurl.filepath={filepath}"))


def test_a_filepath_inside_the_item_still_works(hostile: Client):
    got = dict(
        pairs.parse(
            raw(hostile, f"/{SERVICE}", f"{BASE}&parsedibiurl.filepath=/./reference.bib").text
        )
    )
    assert got["url"].endswith(f"/col/{ITEM}/doc/reference.bib")


# ------------------------------------------------------------------------------ /col/


@pytest.mark.parametrize(
    "path",
    [
        f"/col/{ITEM}/doc/out.txt",
        f"/col/{ITEM}/doc/outdir/secret.txt",
        f"/col/{ITEM}/doc/rel-out",
        f"/col/{ITEM}/doc/sibling.pdf",
        f"/col/{ITEM}/doc/loop",
        f"/col/{ITEM}/doc/loop-a",
        f"/col/{ITEM}/doc//etc/passwd",
        f"/col/{ITEM}/doc/../../../../../secret.txt",
        f"/col/{ITEM}/doc/..\\item.yaml",
        f"/col/{ITEM}/doc/reference.bib\x00.pdf",
        f"/col/{ITEM}/doc/outdir",
        f"/col/{ITEM}/doc",
        f"/col/{ITEM}/item.yaml",
        "/col/../secret.txt",
        "/col//etc/passwd",
        "/col/\xff\xfe/doc/x",
        f"/col/{ITEM}/doc/\xff",
        f"/col/{ITEM}/doc/" + "a" * 5000,
        "/col/" + "/".join(["doc"] * 500),
    ],
)
def test_col_serves_nothing_outside_an_items_doc(hostile: Client, path):
    response = raw(hostile, path)
    assert response.status_int == 404, path
    assert b"outside the collection" not in response.body


def test_col_still_serves_the_items_own_files(hostile: Client):
    assert raw(hostile, f"/col/{ITEM}/doc/reference.bib").status_int == 200


# ------------------------------------------------------------- IBIs, verbs, parameters


@pytest.mark.parametrize(
    "ibi",
    [
        "a.b/c/99999999999999999999/01.01.00.00",  # a year no datetime holds
        "a.b/c/2020/13.01.00.00",
        "a.b/c/2020/02.30.00.00",
        "a.b/c/2020/01.01.24.00",
        "a.b/c/2020/01.01.00.00.99",
        "LK47B6W",
        "LK47B6W/",
        "/362SFKH",
        "LK47B6W//362SFKH",
        "LK47B6W/362SFKH/x",
        "LK47B6W/362SFKI",
        "a" * 3000,
        "%00",
        "%ff/%fe",
        "a%20b/c",
        "\u00e9t\u00e9/x",
        "{rep LK47B6W/362SFKH}",
    ],
)
def test_malformed_ibis_are_400(hostile: Client, ibi):
    query = f"servicesubject=urlRequest&clientinformation.ipaddress=1.2.3.4&parsedibiurl.ibi={ibi}"
    response = raw(hostile, f"/{SERVICE}", query.encode("utf-8").decode("latin-1"))
    assert_error(response)


@pytest.mark.parametrize(
    "verbs",
    [
        "GetEverything",
        "GetTranslation()",
        "GetTranslation(p)",
        "GetTranslation(PT)",
        "GetMetadata(marc)",
        "GetMetadata GetMetadata",
        "GetLastEdition GetLastEdition",
        "GetTranslation GetLastEdition GetTranslation",
        "%00",
        "GetFileList%00",
        "%ff",
        "GetLastEdition,GetMetadata",
        "(" * 100,
    ],
)
def test_malformed_verb_lists_are_400(hostile: Client, verbs):
    assert_error(raw(hostile, f"/{SERVICE}", f"{BASE}&parsedibiurl.verblist={verbs}"))


@pytest.mark.parametrize(
    "query",
    [
        f"{BASE}&parsedibiurl.ibi=LK47B6W/362SFKH",
        f"{BASE}&servicesubject=acknowledgment",
        f"{BASE}&parsedibiurl.filepath=/a&parsedibiurl.filepath=/b",
        "servicesubject=inclusionConfirmationRequest&servicesubject=inclusionConfirmationRequest",
    ],
)
def test_repeated_parameters_are_400(hostile: Client, query):
    assert_error(raw(hostile, f"/{SERVICE}", query), reason="more than once")


@pytest.mark.parametrize(
    "ips", ["", "1.2.3.4%20", "1.2.3.4,5.6.7.8", "999.1.1.1", "localhost", "%ff", "1.2.3.4%00"]
)
def test_malformed_client_addresses_are_400(hostile: Client, ips):
    query = (
        f"servicesubject=urlRequest&clientinformation.ipaddress={ips}"
        "&parsedibiurl.ibi=LK47B6W/362SFKH"
    )
    assert_error(raw(hostile, f"/{SERVICE}", query))


@pytest.mark.parametrize(
    "override, reason",
    [
        ({"contenttype": "Everything"}, "contenttype must be Data or Metadata"),
        ({"state": "Deleted"}, "state must be Original or Copy"),
        ({"urlkey": "1234567890-12"}, "urlkey must be digits"),
        ({"urlkey": "%ff"}, "urlkey must be digits"),
        ({"url": ""}, "acknowledgment needs url"),
    ],
)
def test_malformed_acknowledgments_are_400(hostile: Client, override, reason):
    params = {
        "servicesubject": "acknowledgment",
        "clientinformation.ipaddress": "1.2.3.4",
        "contenttype": "Data",
        "state": "Original",
        "url": "http://x.example/col/a",
        "url.persistent": "http://urlib.net/LK47B6W/362SFKH",
        "urlkey": "1427244889123456-12345678901234567890",
    }
    params.update(override)
    query = "&".join(f"{k}={v}" for k, v in params.items())
    assert_error(raw(hostile, f"/{SERVICE}", query), reason=reason)


# ------------------------------------------------------------------ sizes and encodings


def test_a_query_string_over_the_limit_is_400(hostile: Client):
    filler = "&x=" + "a" * limits.MAX_QUERY_STRING
    assert_error(raw(hostile, f"/{SERVICE}", BASE + filler), reason="query string longer than")
    assert raw(hostile, f"/{SERVICE}", BASE).status_int == 200


def test_a_body_over_the_limit_is_refused_before_it_is_read(hostile: Client):
    # The one route taking a body (OAI-PMH's POST) read it whole, however long: 200 MB made
    # the worker's RSS grow 800 MB and took 3.9 s (the last adversarial pass).
    oai = f"/{SERVICE}/oai"
    form = "verb=Identify&x=" + "a" * limits.MAX_BODY
    hostile.test.post(oai, form, content_type="application/x-www-form-urlencoded", status=413)
    assert "<Identify>" in hostile.test.post(oai, {"verb": "Identify"}).text


def test_oversized_or_too_many_headers_are_400(hostile: Client):
    big = {"X-Big": "b" * limits.MAX_HEADER_FIELD}
    assert_error(raw(hostile, f"/{SERVICE}", BASE, big), reason="header field longer than")
    many = {f"X-H{i}": "v" for i in range(limits.MAX_HEADER_FIELDS + 1)}
    assert_error(raw(hostile, f"/{SERVICE}", BASE, many), reason="header fields")
    assert_error(raw(hostile, f"/col/{ITEM}/doc/reference.bib", "", big))


@pytest.mark.parametrize(
    "query",
    [
        BASE + "&parsedibiurl.verblist=GetTranslation(\xe9)",  # raw Latin-1 byte
        BASE.replace("LK47B6W", "LK47B6W\xff"),
        "servicesubject=urlRequest\x80",
        "servicesubject=inclusionConfirmationRequest&\xc3\xa9=1",  # raw UTF-8 bytes
    ],
)
def test_raw_bytes_outside_ascii_in_the_query_are_400(hostile: Client, query):
    assert_error(raw(hostile, f"/{SERVICE}", query), reason="not ASCII")


@pytest.mark.parametrize(
    "query",
    [
        "servicesubject=urlRequest%ff",
        "servicesubject=%c3%28",
        "servicesubject=%ed%a0%80",
        "servicesubject=urlRequest&clientinformation.ipaddress=1.2.3.4&parsedibiurl.ibi=%c0%af",
    ],
)
def test_escaped_bytes_that_are_not_utf8_are_400(hostile: Client, query):
    assert_error(raw(hostile, f"/{SERVICE}", query))


@pytest.mark.parametrize(
    "path",
    [
        f"//{SERVICE}",
        f"/{SERVICE}/",
        f"/{SERVICE}//filelist/{ITEM}",
        f"/{SERVICE}/filelist//{ITEM}",
        f"/col/{ITEM}//doc/reference.bib",
    ],
)
def test_doubled_slashes_are_never_a_redirect_to_the_host_header(hostile: Client, path):
    response = raw(hostile, path, BASE, {"Host": "evil.example"})
    assert response.status_int in (200, 404) and "Location" not in response.headers
    assert "evil" not in response.text


def test_the_service_path_with_bytes_that_are_not_utf8_is_404(hostile: Client):
    assert raw(hostile, f"/{SERVICE}\xff", BASE).status_int == 404
    assert raw(hostile, f"/{SERVICE}/filelist/\xff\xfe", "").status_int == 404
    assert raw(hostile, f"/{SERVICE}/metadata/{ITEM}/\x00", "").status_int == 404


# ------------------------------------------------------------------------ lying headers


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "evil.example"},
        {
            "Host": "evil.example:666",
            "X-Forwarded-Host": "evil.example",
            "X-Forwarded-Proto": "https",
            "X-Forwarded-Prefix": "/evil",
            "Forwarded": "host=evil.example",
        },
        {"Host": "mtc-m16c.sid.inpe.br@evil.example"},
    ],
)
def test_urls_come_from_archiveaddress_whatever_the_host_header_says(hostile: Client, headers):
    for verbs in ("", "GetFileList", "GetMetadata"):
        query = (
            "servicesubject=urlRequest&clientinformation.ipaddress=1.2.3.4"
            "&parsedibiurl.ibi=8JMKD3MGP8W/35MME4E"
        )
        if verbs:
            query += f"&parsedibiurl.verblist={verbs}"
        body = raw(hostile, f"/{SERVICE}", query, headers).text
        urls = [v for n, v in pairs.parse(body) if n.startswith("url") and n != "urlkey"]
        assert urls and all(u.startswith(f"http://{ADDRESS}/") for u in urls), urls
        assert "evil" not in body
    page = raw(hostile, f"/{SERVICE}/filelist/{ITEM}", "", headers)
    assert "evil" not in page.text and f"http://{ADDRESS}/col/" in page.text


# ------------------------------------------------------------------ property-based tests

NAMES = [
    "servicesubject",
    "clientinformation.ipaddress",
    "parsedibiurl.ibi",
    "parsedibiurl.filepath",
    "parsedibiurl.verblist",
    "contenttype",
    "state",
    "url",
    "url.persistent",
    "urlkey",
    "ibi",
    "x",
]
VALUES = [
    "urlRequest",
    "acknowledgment",
    "inclusionConfirmationRequest",
    "1.2.3.4",
    "150.163.2.175%20172.16.44.200",
    "2001:12f0::1",
    "LK47B6W/362SFKH",
    "8JMKD3MGP8W/35MME4E",
    "sid.inpe.br/mtc-m18@80/2009/07.21.14.43",
    "iconet.com.br/banon/2010/01.20.11.05",
    "sid.inpe.br/mtc-m19/2014/02.11.10.05",
    "/reference.bib",
    "/Relat%f3rio%20Final.pdf",
    "/..",
    "GetFileList",
    "GetLastEdition",
    "GetTranslation",
    "GetTranslation(pt)",
    "GetMetadata(oai_dc)",
    "GetLastEdition+GetMetadata",
    "GetTranslation%20GetMetadata",
    "Data",
    "Original",
    "http://x.example/col/a",
    "1427244889123456-12345678901234567890",
    "",
]
ESCAPES = st.integers(0, 255).map(lambda b: f"%{b:02x}")
JUNK = st.lists(st.one_of(st.sampled_from(list(string.printable)), ESCAPES), max_size=12).map(
    "".join
)
PAIR = st.tuples(
    st.one_of(st.sampled_from(NAMES), JUNK),
    st.one_of(
        st.sampled_from(VALUES),
        JUNK,
        st.sampled_from(VALUES).flatmap(lambda v: JUNK.map(lambda j: v + j)),
    ),
)
QUERIES = st.one_of(
    st.lists(PAIR, max_size=8).map(lambda ps: "&".join(f"{n}={v}" for n, v in ps)),
    st.lists(
        st.sampled_from(NAMES + VALUES + ["=", "&", "%", "+", "%zz", "%2", ";"]), max_size=20
    ).map("".join),
    st.text(st.characters(min_codepoint=0, max_codepoint=255), max_size=60),
)


@hsettings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=QUERIES)
def test_random_query_strings_never_break_the_contract(hostile: Client, query: str):
    response = raw(hostile, f"/{SERVICE}", query)
    if not query:  # no query at all: a person in a browser, sent to the Archive's page
        assert response.status_int == 303
        return
    assert response.status_int in (200, 400), (query, response.status, response.body[:300])
    assert response.content_type == "text/plain"
    assert response.body.isascii()
    if response.status_int == 200:
        pairs.parse(response.text)  # Table 4.2, or PairsError
        assert response.text == pairs.render(pairs.parse(response.text)), "sorted, CRLF"
    else:
        assert_error(response)


SEGMENTS = st.one_of(
    st.sampled_from(
        [
            "",
            ".",
            "..",
            "doc",
            "col",
            "iconet.com.br",
            "banon",
            "2009",
            "09.09.22.01",
            "reference.bib",
            "out.txt",
            "outdir",
            "loop",
            "secret.txt",
            "LK47B6W",
            "362SFKH",
        ]
    ),
    st.text(st.characters(min_codepoint=0, max_codepoint=255), max_size=8),
)


@hsettings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(segments=st.lists(SEGMENTS, max_size=9))
def test_random_col_paths_serve_only_the_items_files(hostile: Client, segments):
    path = "/col/" + "/".join(segments)
    response = raw(hostile, path, headers={"Host": "evil.example"})
    assert response.status_int in (200, 404), (path, response.status)
    assert "evil" not in str(response.headers), "no redirect built from the Host header"
    if response.status_int == 200:
        real = (hostile.app.extensions["archive"].catalog.root / path[len("/col/") :]).resolve()
        assert f"/{ITEM}/doc/" in str(real) or "/doc/" in str(real)
        assert b"outside the collection" not in response.body
