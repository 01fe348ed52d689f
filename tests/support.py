"""What the tests share besides fixtures: the sample's names, the WebTest `Client`, the seed's
reference answers (Examples 7.2-8.2) and small readers of answers. Fixtures live in conftest.py;
processes and servers in serve_process.py."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path

import webtest
from werkzeug.exceptions import NotFound
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from archive_service.protocol import pairs

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_collection"
SERVICE = "sid.inpe.br/mtc-m18@80/2008/03.17.15.17"
PLATFORM = "dpi.inpe.br/banon/1998/08.02.08.56"
ADDRESS = "mtc-m16c.sid.inpe.br"
PHONE = (360, 800)  # CSS pixels: a small phone held upright (the browser tests' screen)
# The 13 header rows of a COUNTER R5.1 tabular report, in the Code's order (§3.2.1): written
# out here, not taken from stores/stats/counter.py, so that the tests hold the code to the Code.
COUNTER_HEADER = (
    "Report_Name",
    "Report_ID",
    "Release",
    "Institution_Name",
    "Institution_ID",
    "Metric_Types",
    "Report_Filters",
    "Report_Attributes",
    "Exceptions",
    "Reporting_Period",
    "Created",
    "Created_By",
    "Registry_Record",
)


def acknowledgment(got: dict[str, str]) -> dict[str, str]:
    """The acknowledgment a resolver sends for the answer `got` (its pairs, parsed)."""
    ibi = got["ibi"].strip("{}")
    return {
        "servicesubject": "acknowledgment",
        "clientinformation.ipaddress": "150.163.2.175",
        "contenttype": got["contenttype"],
        "ibi": ibi,
        "state": got["state"],
        "url": got["url"],
        "url.persistent": "http://urlib.net/" + ibi,
        "urlkey": got["urlkey"],
    }


def at_once(work: Callable[[], object], count: int) -> list:
    """`work()` in `count` threads started together; what each returned. Any exception is
    raised here (the first), after every thread has ended."""
    results, errors = [], []

    def run():
        try:
            results.append(work())
        except Exception as exc:  # noqa: BLE001 (raised below)
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def break_collection(collection: Path) -> None:
    """A copy of the sample with a problem of each kind `check` reports: a broken sidecar, an
    unknown key, a duplicate IBI, an edition cycle, a malformed relation."""
    (collection / "iconet.com.br/banon/2009/09.09.22.01/item.yaml").write_text("target: [x\n")
    with open(collection / "dpi.inpe.br/banon/2003/12.10.19.30/item.yaml", "a") as f:
        f.write("colour: blue\n")
    dup = collection / "8JMKD3MGP8W/35MME4E/doc"
    dup.mkdir(parents=True)
    (dup / "x.txt").write_text("x")
    (collection / "sid.inpe.br/mtc-m18/2012/07.12.18.08/item.yaml").write_text(
        "ibip: 8JMKD3MGP8W/3C9EP6P\nnextedition: sid.inpe.br/mtc-m18@80/2009/07.21.14.43\n"
    )
    (collection / "sid.inpe.br/mtc-m19/2013/09.04.12.27.57/item.yaml").write_text(
        "metadata: not/an/ibi\n"
    )


class Client:
    """WebTest over the app, either at the root or mounted under a prefix through WSGI."""

    def __init__(self, app, mount: str):
        self.mount = mount
        self.app = app
        wsgi = DispatcherMiddleware(NotFound(), {mount: app}) if mount else app
        self.test = webtest.TestApp(wsgi)

    def path(self, path: str) -> str:
        return self.mount + path

    def service(self, status=200, **params):
        return self.test.get(self.path("/" + SERVICE), params=params, status=status)

    def url_request(self, ibi: str, status=200, ip="150.163.2.175", **extra):
        params = {
            "servicesubject": "urlRequest",
            "clientinformation.ipaddress": ip,
            "parsedibiurl.ibi": ibi,
        }
        params.update({f"parsedibiurl.{k}": v for k, v in extra.items()})
        return self.test.get(self.path("/" + SERVICE), params=params, status=status)

    def get(self, path: str, **kwargs):
        return self.test.get(self.path(path), **kwargs)

    def get_url(self, url: str, **kwargs):
        """GET an absolute URL the Archive handed out (its host is archiveaddress)."""
        prefix = f"http://{ADDRESS}"
        assert url.startswith(prefix + self.mount), url
        return self.test.get(url[len(prefix) :], **kwargs)


def settings_for(collection: Path, state: Path, **more) -> dict:
    return {
        "collection": str(collection),
        "archiveaddress": "archive.example.org",
        "archiveserviceibi": SERVICE,
        "state_dir": str(state),
        **more,
    }


def url_request(app: webtest.TestApp, ibi: str, verbs: str = "", filepath: str = "") -> str:
    """urlRequest's answer from `app`, its urlkey left out (fresh on every answer)."""
    query = {
        "servicesubject": "urlRequest",
        "clientinformation.ipaddress": "192.0.2.1",
        "parsedibiurl.ibi": ibi,
    }
    if verbs:
        query["parsedibiurl.verblist"] = verbs
    if filepath:
        query["parsedibiurl.filepath"] = filepath
    body = app.get("/" + SERVICE, params=query).text
    return re.sub(r"urlkey [0-9-]+(\r\n)?", "", body)


def pairs_of(body: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in body.split("\r\n") if line)


# ------------------------------------------------ the seed's reference answers, pair for pair

COL = f"http://{ADDRESS}/col"
URLKEY = re.compile(r"[0-9]{10,}-[0-9]{10,}")

ID = f"""
archiveaddress {ADDRESS}
ibi.archiveservice {{rep {SERVICE}}}
ibi.platformsoftware {{rep {PLATFORM}}}
"""

EXAMPLE_7_2 = (
    ID
    + f"""
contenttype Data
contenttype.lastedition Data
contenttype.lastedition.metadata Metadata
contenttype.lastedition.metadata(oai_dc) Metadata
contenttype.metadata Metadata
contenttype.metadata(oai_dc) Metadata
contenttype.metadata.translation Metadata
contenttype.translation(en) Data
contenttype.translation(pt) Data
ibi {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23 ibip 8JMKD3MGP8W/35MME4E}}
ibi.lastedition {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23 ibip 8JMKD3MGP8W/35MME4E}}
ibi.lastedition.metadata {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47}}
ibi.lastedition.metadata(oai_dc) {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47}}
ibi.metadata {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47}}
ibi.metadata(oai_dc) {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47}}
ibi.metadata.translation {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47}}
ibi.translation(en) {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23}}
ibi.translation(pt) {{rep sid.inpe.br/mtc-m18@80/2009/08.25.19.43}}
state Original
state.lastedition Original
state.lastedition.metadata Original
state.lastedition.metadata(oai_dc) Original
state.metadata Original
state.metadata(oai_dc) Original
state.metadata.translation Original
state.translation(en) Original
state.translation(pt) Original
timestamp 2009-07-21T13:23:45Z
timestamp.lastedition 2009-07-21T13:23:45Z
timestamp.lastedition.metadata 2014-04-04T17:39:54Z
timestamp.lastedition.metadata(oai_dc) 2014-04-04T17:39:54Z
timestamp.metadata 2014-04-04T17:39:54Z
timestamp.metadata(oai_dc) 2014-04-04T17:39:54Z
timestamp.metadata.translation 2014-04-04T17:39:54Z
timestamp.translation(en) 2009-07-21T13:23:45Z
timestamp.translation(pt) 2011-09-22T14:45:11Z
url {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23/doc/CCSDS%20643.0-B-1.pdf
url.lastedition {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23/doc/CCSDS%20643.0-B-1.pdf
url.lastedition.metadata {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47/doc/metadata.html
url.lastedition.metadata(oai_dc) {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47/doc/oai_dc.xml
url.metadata {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47/doc/metadata.html
url.metadata(oai_dc) {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47/doc/oai_dc.xml
url.metadata.translation {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47/doc/metadata.html
url.translation(en) {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23/doc/CCSDS%20643.0-B-1.pdf
url.translation(pt) {COL}/sid.inpe.br/mtc-m18@80/2009/08.25.19.43/doc/RTC-07.pdf
urlkey *
"""
)

EXAMPLE_7_3 = (
    ID
    + f"""
contenttype.translation(en) Data
contenttype.translation(pt) Data
ibi {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23 ibip 8JMKD3MGP8W/35MME4E}}
ibi.translation(en) {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23}}
ibi.translation(pt) {{rep sid.inpe.br/mtc-m18@80/2009/08.25.19.43}}
state.translation(en) Original
state.translation(pt) Original
timestamp.translation(en) 2009-07-21T13:23:45Z
timestamp.translation(pt) 2011-09-22T14:45:11Z
url.translation(en) {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23/doc/CCSDS%20643.0-B-1.pdf
url.translation(pt) {COL}/sid.inpe.br/mtc-m18@80/2009/08.25.19.43/doc/RTC-07.pdf
urlkey *
"""
)

EXAMPLE_8_1 = (
    ID
    + f"""
contenttype Data
ibi {{rep sid.inpe.br/mtc-m18@80/2009/07.21.14.43 ibip 8JMKD3MGP8W/35MMLL8}}
state Original
timestamp 2009-07-21T14:43:31Z
url {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.14.43/doc/CCSDS%20650.0-B-1.pdf
urlkey *
"""
)

EXAMPLE_8_2_FIRST = (
    ID
    + """
ibi {rep sid.inpe.br/mtc-m18@80/2009/07.21.14.43 ibip 8JMKD3MGP8W/35MMLL8}
ibi.nextedition {rep sid.inpe.br/mtc-m18/2012/07.12.18.08}
"""
)

EXAMPLE_8_2_SECOND = (
    ID
    + f"""
contenttype.lastedition.metadata(oai_dc) Metadata
ibi {{rep sid.inpe.br/mtc-m18/2012/07.12.18.08 ibip 8JMKD3MGP8W/3C9EP6P}}
ibi.lastedition.metadata(oai_dc) {{rep sid.inpe.br/mtc-m18/2012/07.12.18.08.49}}
state.lastedition.metadata(oai_dc) Original
timestamp.lastedition.metadata(oai_dc) 2014-04-04T17:36:01Z
url.lastedition.metadata(oai_dc) {COL}/sid.inpe.br/mtc-m18/2012/07.12.18.08.49/doc/oai_dc.xml
urlkey *
"""
)


def expected(text: str) -> list[tuple[str, str]]:
    return sorted(tuple(line.split(" ", 1)) for line in text.strip().splitlines() if line)


def assert_answer(body: str, text: str) -> None:
    """`body` is exactly the expected list (sorted, CRLF) but for a fresh, well-formed urlkey."""
    got = pairs.parse(body)
    assert body == pairs.render(got), "pairs must be sorted by name, one per CRLF line"
    want = expected(text)
    keys = [v for n, v in got if n == "urlkey"]
    assert len(keys) == (1 if ("urlkey", "*") in want else 0)
    assert all(URLKEY.fullmatch(k) for k in keys)
    assert [(n, "*" if n == "urlkey" else v) for n, v in got] == want


def png_facts(data: bytes) -> tuple[int, int, int]:
    """(width, height, distinct bytes among its pixel rows) of an 8-bit, non-interlaced PNG:
    a blank page is one colour, a page with text is many."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height, depth, _, _, _, interlace = struct.unpack(">IIBBBBB", data[16:29])
    assert depth == 8 and interlace == 0, (depth, interlace)
    chunks, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        if kind == b"IDAT":
            chunks.append(data[at + 8 : at + 8 + length])
        at += 12 + length
    pixels = zlib.decompress(b"".join(chunks))
    row = len(pixels) // height
    # Each row starts with its filter byte; the rest are (filtered) samples.
    distinct = len({pixels[i * row + 1 : (i + 1) * row] for i in range(height)})
    return width, height, distinct


def garble_past_first_page(path: Path) -> None:
    """Damage the index file at `path` as a failing disk would under a running service: what
    its WAL holds goes into the file first, then every page after the first is garbage."""
    import os
    import sqlite3

    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    finally:
        conn.close()
    with open(path, "r+b") as f:
        f.seek(4096)
        f.write(os.urandom(path.stat().st_size - 4096))


# A month of uses by hand, for the statistics page and the COUNTER API (figures in the tests).
ITEM_A = "a.example/x/2026/01.01.00.00"
ITEM_B = "b.example/y/2026/01.02.00.00"
ITEM_C = "c.example/z/2026/01.03.00.00"
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
CHROME = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/126.0 Safari/537.36"
GOOGLEBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"


def record_month_of_uses(state_dir: Path, database: str = "") -> None:
    """Uses of December 2025 and January 2026, written through the store as serve does:
    Dec 15 14:00 u1 requests A twice 60 s apart (2 requests). Jan 5 10:00 u1 requests A at
    +0, +10 (a double-click: one) and +41 (counts); Googlebot requests A three times (none
    counts); u2 views B's metadata at +300 and requests B at +310. Jan 20 u1 requests C at
    09:00 and 11:00 (two sessions). January: A 2 requests in 1 session; B 1 request and 2
    investigations in 1 session; C 2 requests in 2 sessions."""
    from datetime import UTC, datetime

    from archive_service.stores import stats
    from archive_service.stores.stats import counter

    clock = [0.0]
    store = stats.open_store(state_dir, database, clock=lambda: clock[0])
    req, inv = counter.REQUEST, counter.INVESTIGATION
    dec = datetime(2025, 12, 15, 14, 0, tzinfo=UTC).timestamp()
    jan5 = datetime(2026, 1, 5, 10, 0, tzinfo=UTC).timestamp()
    jan20 = datetime(2026, 1, 20, 9, 0, tzinfo=UTC).timestamp()
    uses = [
        (dec, ITEM_A, req, "192.0.2.1", FIREFOX),
        (dec + 60, ITEM_A, req, "192.0.2.1", FIREFOX),
        (jan5, ITEM_A, req, "192.0.2.1", FIREFOX),
        (jan5 + 10, ITEM_A, req, "192.0.2.1", FIREFOX),
        (jan5 + 20, ITEM_A, req, "192.0.2.3", GOOGLEBOT),
        (jan5 + 25, ITEM_A, req, "192.0.2.3", GOOGLEBOT),
        (jan5 + 30, ITEM_A, req, "192.0.2.3", GOOGLEBOT),
        (jan5 + 41, ITEM_A, req, "192.0.2.1", FIREFOX),
        (jan5 + 300, ITEM_B, inv, "192.0.2.2", CHROME),
        (jan5 + 310, ITEM_B, req, "192.0.2.2", CHROME),
        (jan20, ITEM_C, req, "192.0.2.1", FIREFOX),
        (jan20 + 7200, ITEM_C, req, "192.0.2.1", FIREFOX),
    ]
    for t, ibi, kind, client, agent in uses:
        clock[0] = t
        store.record_use(stats.Seen(ibi, kind, client, agent))
    assert store.problem is None
    store.close()
