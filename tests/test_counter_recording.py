"""What COUNTER needs is recorded, privacy-safe: each use served or acknowledged, no address."""

from __future__ import annotations

import sqlite3

import pytest

from archive_service.protocol import pairs
from archive_service.stores import stats
from archive_service.stores.stats import counter
from archive_service.web import create_app
from support import ADDRESS, SERVICE, Client

RELATORIO = "8JMKD3MGP7W/3EPGUE5"  # sid.inpe.br/mtc-m19/2013/09.04.12.27.57
USER_IP = "150.163.2.175"
BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
ROBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
FILELIST = f"/{SERVICE}/filelist/iconet.com.br/banon/2009/09.09.22.01"
METADATA = f"/{SERVICE}/metadata/iconet.com.br/banon/2012/03.05.08.15"


def recorded(store: stats.Statistics) -> list[tuple[str, str, bool]]:
    return sorted((u.ibi, u.kind, u.robot) for u in store.uses(0, 2**40))


def acknowledge(client: Client, got: dict[str, str]) -> None:
    client.service(
        servicesubject="acknowledgment",
        **{"clientinformation.ipaddress": f"{USER_IP} 10.0.0.1"},
        contenttype=got["contenttype"],
        state=got["state"],
        url=got["url"],
        **{"url.persistent": "http://urlib.net/" + RELATORIO},
        urlkey=got["urlkey"],
    )


def test_pages_files_and_acknowledgments_are_recorded_without_the_address(settings):
    client = Client(create_app(settings), "")
    got = dict(pairs.parse(client.url_request(RELATORIO).text))
    user = {"REMOTE_ADDR": USER_IP}
    client.get_url(got["url"], headers={"User-Agent": BROWSER}, extra_environ=user)
    client.get_url(got["url"], headers={"User-Agent": ROBOT}, extra_environ=user)
    client.test.head(got["url"][len(f"http://{ADDRESS}") :], headers={"User-Agent": BROWSER})
    client.get(FILELIST, headers={"User-Agent": BROWSER})
    client.get(METADATA, headers={"User-Agent": BROWSER})
    client.get(METADATA + "?format=oai_dc", headers={"User-Agent": BROWSER})
    acknowledge(client, got)
    client.app.extensions["stats"].flush()  # uses are written in batches (test_counter_batches)
    store = stats.Store(settings["state_dir"])
    relatorio = "sid.inpe.br/mtc-m19/2013/09.04.12.27.57"
    assert recorded(store) == sorted(
        [
            (relatorio, counter.REQUEST, False),  # the download
            (relatorio, counter.REQUEST, True),  # the robot's, flagged
            ("iconet.com.br/banon/2009/09.09.22.01", counter.INVESTIGATION, False),
            ("iconet.com.br/banon/2012/03.05.08.15", counter.INVESTIGATION, False),
            ("iconet.com.br/banon/2012/03.05.08.15", counter.INVESTIGATION, False),
        ]
    ), "a HEAD is no use; the acknowledgment of a file served here is its download, seen"
    raw = store.path.read_bytes() + store.path.with_name(store.path.name + "-wal").read_bytes()
    for secret in (USER_IP, "Firefox", "Googlebot"):
        assert secret.encode() not in raw, f"{secret} kept at rest"
    users = {u.user for u in store.uses(0, 2**40)}
    assert len(users) == 3, "browser, robot (same address), the pages' client"
    report = stats.Store(settings["state_dir"]).report()
    assert (report["total"], report["rejected"]) == (1, 0), "`total` still counts acknowledgments"


def test_a_range_not_satisfiable_or_a_failed_precondition_is_no_use(settings):
    # No file is served (416, 412): docs/counter.md counts "a /col/ file served".
    client = Client(create_app(settings), "")
    got = dict(pairs.parse(client.url_request(RELATORIO).text))
    path = got["url"][len(f"http://{ADDRESS}") :]
    browser = {"User-Agent": BROWSER}
    client.test.get(path, headers={**browser, "Range": "bytes=99999999-"}, status=416)
    client.test.get(path, headers={**browser, "If-Match": '"another"'}, status=412)
    client.test.get(path, headers={**browser, "Range": "bytes=0-9"}, status=206)
    client.app.extensions["stats"].flush()
    relatorio = "sid.inpe.br/mtc-m19/2013/09.04.12.27.57"
    assert recorded(stats.Store(settings["state_dir"])) == [(relatorio, counter.REQUEST, False)]


def test_acknowledgments_of_files_served_elsewhere_are_uses(settings):
    client = Client(create_app({**settings, "url_base": "http://files.example.org/c"}), "")
    got = dict(pairs.parse(client.url_request(RELATORIO).text))
    assert got["url"].startswith("http://files.example.org/c/")
    acknowledge(client, got)
    acknowledge(client, got)  # a replay: no use
    client.app.extensions["stats"].flush()
    store = stats.Store(settings["state_dir"])
    found = store.uses(0, 2**40)
    assert [(u.ibi, u.kind, u.robot) for u in found] == [
        ("sid.inpe.br/mtc-m19/2013/09.04.12.27.57", counter.REQUEST, False)
    ]
    other = stats.Seen("x", counter.REQUEST, USER_IP, None)
    store.record_use(other)
    assert len({u.user for u in store.uses(0, 2**40)}) == 1, "the user is the first address"


def test_the_salt_lives_one_day_and_uses_the_retention(tmp_path):
    clock = [1_767_225_600.0]  # 2026-01-01T00:00:00Z
    store = stats.Store(tmp_path, clock=lambda: clock[0], retention_days=2)
    seen = stats.Seen("a/b", counter.REQUEST, USER_IP, BROWSER)
    store.record_use(seen)
    clock[0] += 3600
    store.record_use(seen)
    clock[0] += 86400
    store.record_use(seen)
    first, second, third = (u.user for u in sorted(store.uses(0, 2**40), key=lambda u: u.time))
    assert first == second, "one user within a day"
    assert first != third, "a new day, a new salt: days cannot be linked"
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("SELECT day FROM salts").fetchall() == [("2026-01-02",)]
    conn.close()
    clock[0] += 2 * 86400 + stats.PURGE_EVERY
    store.record_use(seen)
    assert len(store.uses(0, 2**40)) == 1, "uses older than stats_retention_days are deleted"
    store.close()


def test_the_shared_database_records_the_same(database_url):
    clock = [1_767_225_600.0]
    store = stats.PostgresStore(database_url, clock=lambda: clock[0], retention_days=2)
    other = stats.PostgresStore(database_url, clock=lambda: clock[0])  # another node
    store.record_use(stats.Seen("a/b", counter.REQUEST, USER_IP, BROWSER))
    other.record_use(stats.Seen("a/b", counter.INVESTIGATION, USER_IP, BROWSER))
    other.record_use(stats.Seen("a/b", counter.REQUEST, USER_IP, ROBOT))
    other.flush()  # its uses, written by its process
    found = sorted(store.uses(0, 2**40), key=lambda u: (u.kind, u.robot))
    assert [(u.kind, u.robot) for u in found] == [
        (counter.INVESTIGATION, False),
        (counter.REQUEST, False),
        (counter.REQUEST, True),
    ]
    assert found[0].user == found[1].user, "every node hashes under the day's one salt"
    assert store.problem is None


@pytest.mark.parametrize("agent", ["", "curl/8.5.0", "python-requests/2.31", ROBOT])
def test_user_agents_on_the_counter_list_are_robots(tmp_path, agent):
    store = stats.Store(tmp_path)
    store.record_use(stats.Seen("a/b", counter.REQUEST, USER_IP, agent))
    assert [u.robot for u in store.uses(0, 2**40)] == [True]
    store.close()


# The COUNTER-Robots list asks for case-insensitive matching (its README: "we recommend to use
# case-insensitive matching"): a crawler that shouts its name is still on it.
@pytest.mark.parametrize(
    "agent", ["GOOGLEBOT/2.1", "Wget/1.21.4", "CURL/8.5.0", "Python-Requests/2.31", "PYTHON-URLLIB"]
)
def test_the_robots_list_matches_in_any_case(tmp_path, agent):
    assert stats.is_robot(agent.lower()), "on the list in its own case"
    store = stats.Store(tmp_path)
    store.record_use(stats.Seen("a/b", counter.REQUEST, USER_IP, agent))
    assert [u.robot for u in store.uses(0, 2**40)] == [True]
    store.close()


@pytest.mark.parametrize(
    "agent",
    [
        BROWSER,
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/126.0.0.0 Safari/537.36 Edg/126.0.2592.87",
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
        "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
        "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/126.0.6478.122 Mobile Safari/537.36",
    ],
)
def test_browsers_are_people_in_any_case(agent):
    assert not stats.is_robot(agent) and not stats.is_robot(agent.upper())


def test_a_days_salt_is_gone_from_the_files_once_the_next_is_made(tmp_path):
    # docs/counter.md: the salt is deleted when the next day's is made, so the address cannot
    # be recovered by trying every IPv4 address. A DELETE leaves the row's bytes in the WAL
    # (the frame that inserted it) and in the page's free space: a copy of state_dir had them.
    clock = [1_767_225_600.0]  # 2026-01-01T00:00:00Z
    store = stats.Store(tmp_path, clock=lambda: clock[0])
    seen = stats.Seen("a/b", counter.REQUEST, USER_IP, BROWSER)
    salts = []
    for _ in range(3):
        store.record_use(seen)
        store.flush()
        with sqlite3.connect(store.path) as conn:
            salts.append(bytes(conn.execute("SELECT salt FROM salts").fetchone()[0]))
        conn.close()
        clock[0] += 86400
    files = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert salts[-1] in files, "today's salt is kept"
    assert not [s for s in salts[:-1] if s in files], "an earlier day's salt is still on disk"
    store.close()
