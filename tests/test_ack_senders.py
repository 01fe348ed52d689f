"""Whose acknowledgments count (issue 30, finding 8; SPEC §8 `resolver_networks`): the
resolver's. One client with no resolver sent urlRequest + acknowledgment pairs, each naming
another user in `clientinformation.ipaddress`, and every pair was a COUNTER request by a new
user (Total and Unique_Item_Requests of a located item rose by 500)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
import webtest

from archive_service.common.net import HostNetworks, address
from archive_service.stores import stats
from archive_service.web import create_app
from serve_process import wait_until
from support import SERVICE, pairs_of
from test_location import ITEM, LANDING, make

RESOLVER_IP = "192.0.2.53"  # the configured resolver's host (TEST-NET-1)
OUTSIDER = "203.0.113.9"  # anyone else (TEST-NET-3)
PAIRS = 500


def located(collection, settings, **more) -> webtest.TestApp:
    make(collection, ITEM, f"location: {LANDING}\n")
    return webtest.TestApp(create_app({**settings, **more}))


def pair(app: webtest.TestApp, sender: str, user: str, forwarded: str = "") -> None:
    """One urlRequest and its acknowledgment, as a resolver sends them, from `sender`."""
    environ = {"REMOTE_ADDR": sender}
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    query = {"clientinformation.ipaddress": user, "parsedibiurl.ibi": ITEM}
    got = pairs_of(
        app.get(
            f"/{SERVICE}",
            params={"servicesubject": "urlRequest", **query},
            extra_environ=environ,
            headers=headers,
        ).text
    )
    done = app.get(
        f"/{SERVICE}",
        params={
            "servicesubject": "acknowledgment",
            "clientinformation.ipaddress": user,
            "contenttype": got["contenttype"],
            "ibi": ITEM,
            "state": got["state"],
            "url": got["url"],
            "url.persistent": f"http://urlib.net/{ITEM}",
            "urlkey": got["urlkey"],
        },
        extra_environ=environ,
        headers=headers,
    )
    assert "acknowledgment received" in done.text, "the protocol's answer, counted or not"


def requests(app: webtest.TestApp) -> tuple[int, int]:
    """The month's Total_Item_Requests and Unique_Item_Requests of the located item."""
    store: stats.Statistics = app.app.extensions["stats"]
    today = datetime.now(UTC).date()
    report = store.item_report(today, today, "test")
    month = today.strftime("%Y-%m")
    found = {"Total_Item_Requests": 0, "Unique_Item_Requests": 0}
    for item in report["Report_Items"]:
        for attributes in item["Attribute_Performance"]:
            for metric in found:
                found[metric] += attributes["Performance"].get(metric, {}).get(month, 0)
    return found["Total_Item_Requests"], found["Unique_Item_Requests"]


def test_forged_pairs_from_a_client_that_is_no_resolver_count_nothing(collection, settings):
    app = located(collection, settings, resolver=f"http://{RESOLVER_IP}/J8LNKB5R7W/3FUQHC5")
    for n in range(PAIRS):
        pair(app, OUTSIDER, f"10.{n // 250}.{n % 250}.1")
    assert requests(app) == (0, 0)
    report = app.app.extensions["stats"].report()
    assert (report["total"], report["rejected_by_reason"]) == (0, {"not-resolver": PAIRS})
    # The resolver's own acknowledgments, for as many users, count: one request per user.
    for n in range(3):
        pair(app, RESOLVER_IP, f"10.9.{n}.1")
    assert requests(app) == (3, 3)
    assert app.app.extensions["stats"].report()["total"] == 3


def test_a_proxy_trusted_names_the_resolver_and_a_client_cannot(collection, settings):
    # Behind a proxy on loopback (trusted_proxies' default) the sender is the address the
    # proxy appends; what a client writes before it is not read.
    app = located(collection, settings, resolver=f"http://{RESOLVER_IP}/J8LNKB5R7W/3FUQHC5")
    pair(app, "127.0.0.1", "10.0.0.1", forwarded=f"{RESOLVER_IP}, {OUTSIDER}")
    assert requests(app) == (0, 0)
    pair(app, "127.0.0.1", "10.0.0.2", forwarded=f"{OUTSIDER}, {RESOLVER_IP}")
    assert requests(app) == (1, 1)
    pair(app, OUTSIDER, "10.0.0.3", forwarded=RESOLVER_IP)  # no proxy of ours
    assert requests(app) == (1, 1)


@pytest.mark.parametrize(
    "more,counted",
    [
        ({"resolver": "none"}, True),  # no resolver: the tests' and a lab's acknowledgments
        ({"resolver": "http://127.0.0.1:8090/J8LNKB5R7W/3FUQHC5"}, True),
        ({"resolver": "http://localhost:8090/J8LNKB5R7W/3FUQHC5"}, True),
        ({"resolver": f"http://{RESOLVER_IP}/J8LNKB5R7W/3FUQHC5"}, False),
        ({"resolver": "none", "resolver_networks": "none"}, False),
        ({"resolver": f"http://{RESOLVER_IP}/x/y", "resolver_networks": "::1, 10.0.0.0/8"}, True),
        ({"resolver": "none", "resolver_networks": "127.0.0.1"}, False),  # exactly those
    ],
)
def test_loopback_counts_only_for_no_resolver_or_one_on_loopback(
    collection, settings, more, counted
):
    app = located(collection, settings, **more)
    pair(app, "::1", "10.0.0.1")
    assert requests(app) == ((1, 1) if counted else (0, 0))


def test_a_name_that_does_not_resolve_counts_nothing_until_it_does(caplog):
    answers: dict[str, set] = {"resolver.example": set()}
    now = [0.0]
    caplog.set_level(logging.INFO)
    senders = HostNetworks(
        hosts=("resolver.example",),
        lookup=lambda host: answers[host],
        clock=lambda: now[0],
    )
    assert "resolver.example resolves to no address" in caplog.text
    assert address(RESOLVER_IP) not in senders
    answers["resolver.example"] = {address(RESOLVER_IP)}
    assert address(RESOLVER_IP) not in senders, "not looked up again on the request path"
    now[0] += 61  # the lookup is due: started in the background, the request does not wait
    address(RESOLVER_IP) in senders  # noqa: B015 (starts the lookup)
    wait_until(lambda: address(RESOLVER_IP) in senders, what="the lookup in the background")
    assert "resolver.example resolves again" in caplog.text
