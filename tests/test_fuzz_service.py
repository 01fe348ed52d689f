"""Generated input through the Archive's app (WebTest) and what feeds its answers: every
answer is a list of pairs (Table 4.2) that parses back to what was meant, and no request is a
500. The inputs that once broke it are explicit examples or tests of their own."""

from __future__ import annotations

import shutil

import pytest
import webtest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from archive_service import settings as settings_mod
from archive_service.collection import sidecar
from archive_service.protocol import pairs
from archive_service.web import create_app
from support import ADDRESS, PLATFORM, SAMPLE, SERVICE, Client

ITEM = "iconet.com.br/banon/2009/09.09.22.01"  # LK47B6W/362SFKH
FIXTURE = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def make_client(root, sidecar_lines: str = "", **more) -> Client:
    """An app over a copy of the sample, ITEM's sidecar with `sidecar_lines` added."""
    collection = root / "collection"
    shutil.copytree(SAMPLE, collection, symlinks=True)
    side = collection / ITEM / "item.yaml"
    side.write_text(side.read_text() + sidecar_lines)
    return Client(
        create_app(
            {
                "collection": str(collection),
                "archiveaddress": ADDRESS,
                "archiveserviceibi": SERVICE,
                "platformsoftware": PLATFORM,
                "resolver": "none",
                "state_dir": str(root / "state"),
                **more,
            }
        ),
        "",
    )


def answer(client: Client, ibi: str, **params) -> dict[str, str]:
    response = client.url_request(ibi, **params)
    return dict(pairs.parse(response.text))  # Table 4.2, or PairsError


# ----------------------------------------------------------------- the sidecar's location

_URL_CHARS = [chr(c) for c in range(0x21, 0x7F)]


@settings(max_examples=400, deadline=None)
@given(path=st.text(st.sampled_from(_URL_CHARS), max_size=20))
@example(path="handle/1{2}")  # braces are no word characters: the answer did not parse
@example(path="{}")
def test_an_accepted_location_is_a_pairs_word(path):
    try:
        url = sidecar.location_url("http://repo.example.org/" + path)
    except ValueError:
        return
    assert pairs.parse(f"url {url}") == [("url", url)]


def test_a_location_with_braces_answers_a_list_of_pairs(tmp_path):
    client = make_client(tmp_path, 'location: "http://repo.example.org/handle/1{2}"\n')
    got = answer(client, "LK47B6W/362SFKH")
    assert got["url"] == "http://repo.example.org/handle/1%7B2%7D"


# ------------------------------------------------------------------ the pages' query strings


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Client:
    return make_client(tmp_path_factory.mktemp("fuzz-service"))


def raw(client: Client, path: str, query: str = ""):
    """A request with PATH_INFO and QUERY_STRING exactly as given (WSGI: latin-1 strings)."""
    request = webtest.TestRequest.blank("/")
    request.environ["PATH_INFO"] = path
    request.environ["QUERY_STRING"] = query
    return client.test.do_request(request, status="*")


PAGES = [
    "/items",
    "/statistics",
    "/about",
    f"/metadata/{ITEM}",
    "/metadata/sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47",
    f"/filelist/{ITEM}",
    "/r51/status",
    "/r51/reports",
    "/r51/reports/ir",
    "/r51/members",
]
_QUERY_PIECES = st.sampled_from(
    ["q", "after", "before", "month", "format", "begin_date", "item_id", "=", "&", "+", "%"]
    + ["%ff", "%00", "%zz", "%c3%a9", "\xc3\xa9", "\xff", "\x80", "'", "*", "sid", "2013-01"]
)


@FIXTURE
@given(page=st.sampled_from(PAGES), query=st.lists(_QUERY_PIECES, max_size=8).map("".join))
@example(page="/items", query="q=\xff")  # Werkzeug's request.args: UnicodeDecodeError, a 500
@example(page="/r51/reports/ir", query="month=\xff")
@example(page=f"/metadata/{ITEM}", query="format=\xc3")
def test_a_pages_query_string_is_never_a_500(archive: Client, page, query):
    response = raw(archive, f"/{SERVICE}{page}", query)
    assert response.status_int < 500, (page, query, response.status, response.text[:300])


def test_raw_bytes_that_are_not_utf8_in_a_pages_query_are_400(archive: Client):
    response = raw(archive, f"/{SERVICE}/items", "q=\xff")
    assert response.status_int == 400 and response.content_type == "text/plain"
    assert pairs.parse(response.text)[0][0] == "error" and "UTF-8" in response.text
    # Raw UTF-8 (what some clients send unescaped) is read as before.
    assert raw(archive, f"/{SERVICE}/items", "q=\xc3\xa9").status_int == 200


# ------------------------------------------------------------- a licensed item, by address

LICENSED = "sid.inpe.br/mtc-m19/2014/02.11.10.05"  # networks 150.163.0.0/16, 2001:12f0::/32
_V4 = st.tuples(st.sampled_from([150, 10, 8]), st.sampled_from([163, 0]), st.integers(0, 255))
_ADDRESSES = st.one_of(
    _V4.map(lambda t: f"{t[0]}.{t[1]}.2.{t[2]}"),
    _V4.map(lambda t: f"::ffff:{t[0]}.{t[1]}.2.{t[2]}"),  # as a dual-stack socket gives it
    st.sampled_from(["2001:12f0::1", "2001:db8::1", "::1", "::ffff:a9a3:2af"]),
)


@FIXTURE
@given(user=_ADDRESSES, proxies=st.lists(_ADDRESSES, max_size=2))
@example(user="::ffff:150.163.2.175", proxies=[])  # an IPv4 user was outside 150.163.0.0/16
def test_the_answer_and_col_agree_on_who_is_inside_a_licensed_items_networks(
    archive: Client, user, proxies
):
    got = answer(archive, LICENSED, ip=" ".join([user, *proxies]))
    data = got["url"].endswith("/article.pdf")
    col = archive.get(
        f"/col/{LICENSED}/doc/article.pdf", extra_environ={"REMOTE_ADDR": user}, status="*"
    )
    assert data == (col.status_int == 200), (user, got["url"], col.status)


# ------------------------------------------------------- settings that go into every answer

_SETTING_CHARS = st.sampled_from(list("az09.-:/%{} \t\xe9@[]"))


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(["archiveaddress", "url_base"]), tail=st.text(_SETTING_CHARS))
@example(name="url_base", tail="files here")  # a blank went into every url pair
@example(name="url_base", tail="{c}")
@example(name="url_base", tail="\xe9")  # a non-ASCII answer: every urlRequest a 400
@example(name="archiveaddress", tail="{b}")
def test_a_setting_every_answer_carries_is_refused_or_a_pairs_word(name, tail):
    value = ("http://files.example.org/" if name == "url_base" else "a") + tail
    try:
        config = settings_mod.load(None, {name: value}, {})
    except settings_mod.ConfigError:
        return
    taken = getattr(config, name)
    assert pairs.parse(f"url {taken}/doc/x") == [("url", f"{taken}/doc/x")], taken


# ------------------------------------------------------- urlRequest: one request, any spelling

_HELD = [ITEM, "LK47B6W/362SFKH", "sid.inpe.br/mtc-m19/2013/09.04.12.27.57", SERVICE]
_VERB_LISTS = [
    [],
    ["GetFileList"],
    ["GetLastEdition"],
    ["GetTranslation"],
    ["GetTranslation(pt)"],
    ["GetMetadata(oai_dc)"],
    ["GetLastEdition", "GetMetadata"],
    ["GetMetadata", "GetTranslation(en)"],
    ["GetFileList", "GetLastEdition"],
]


def _body(client: Client, query: str):
    response = raw(client, f"/{SERVICE}", query)
    assert response.status_int in (200, 400), (query, response.status)
    got = pairs.parse(response.text)
    return response.status_int, [p for p in got if p[0] != "urlkey"]


@FIXTURE
@given(
    ibi_=st.sampled_from(_HELD),
    verbs=st.sampled_from(_VERB_LISTS),
    filepath=st.sampled_from(["", "/reference.bib", "reference.bib", "//./reference.bib"]),
    flips=st.lists(st.booleans(), min_size=60, max_size=60),
    separator=st.sampled_from(["+", "%20", "%2B", "%09", "+%2B"]),
)
def test_spellings_of_one_urlrequest_get_the_same_answer(
    archive: Client, ibi_, verbs, filepath, flips, separator
):
    """Either case of the IBI (SPEC §2), '+' or blanks between verbs (§3, Contract), the file
    path with or without its slash (Example 7.11): the same answer but for its urlkey."""

    def query(ibi_text: str, joined: str) -> str:
        return (
            "servicesubject=urlRequest&clientinformation.ipaddress=150.163.2.175"
            f"&parsedibiurl.ibi={ibi_text}"
            + (f"&parsedibiurl.verblist={joined}" if verbs else "")
            + (f"&parsedibiurl.filepath={filepath}" if filepath else "")
        )

    cased = "".join(c.upper() if flip else c.lower() for c, flip in zip(ibi_, flips))
    plain = _body(archive, query(ibi_, "+".join(verbs)))
    assert plain[0] == 200
    assert _body(archive, query(cased, separator.join(verbs))) == plain


_SUBJECTS = ["urlRequest", "acknowledgment", "inclusionConfirmationRequest", "x", ""]
_VALUES = st.sampled_from(
    [ITEM, "LK47B6W/362SFKH", "GetFileList+GetLastEdition", "/reference.bib", "Data", "Copy"]
    + ["150.163.2.175+::1", "::ffff:150.163.2.175", "1.2.3.4%2b", "1427244889123456-1234567890"]
    + ["http://x.example/col/a", "%ff", "%00", "{", "}", "%7b", "", "%", "+", "%0d%0a"]
)
_NAMES = st.sampled_from(
    ["clientinformation.ipaddress", "parsedibiurl.ibi", "parsedibiurl.verblist", "ibi"]
    + ["parsedibiurl.filepath", "contenttype", "state", "url", "url.persistent", "urlkey"]
)


@FIXTURE
@given(
    subject=st.sampled_from(_SUBJECTS),
    params=st.dictionaries(_NAMES, st.lists(_VALUES, min_size=1, max_size=3).map("".join)),
)
def test_every_subject_answers_a_list_of_pairs_or_a_400(archive: Client, subject, params):
    query = f"servicesubject={subject}" + "".join(f"&{n}={v}" for n, v in params.items())
    _body(archive, query)  # 200 or 400, a list of pairs either way
