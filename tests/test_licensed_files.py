"""A licensed item (`access: networks`): its files under /col/ and its file-list page are served
only to users inside its networks. Who the user is: the connection's address, or, when the
connection comes from a trusted proxy (`trusted_proxies`), the address it forwards."""

from __future__ import annotations

import pytest
import webtest

from archive_service import settings as settingsmod
from archive_service.web import create_app
from support import SERVICE

LICENSED = "sid.inpe.br/mtc-m19/2014/02.11.10.05"
FILE = f"/col/{LICENSED}/doc/article.pdf"
FILELIST = f"/{SERVICE}/filelist/{LICENSED}"
OPEN_FILE = "/col/iconet.com.br/banon/2009/09.09.22.01/doc/reference.bib"
INSIDE = "150.163.2.175"  # in 150.163.0.0/16, one of the item's networks
OUTSIDE = "192.0.2.7"


@pytest.fixture
def app(settings):
    return webtest.TestApp(create_app(settings))


def get(app, path, remote, forwarded=None, status="*"):
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    return app.get(path, headers=headers, extra_environ={"REMOTE_ADDR": remote}, status=status)


@pytest.mark.parametrize("path", [FILE, FILELIST, f"/col/{LICENSED}/doc/no-such-file"])
def test_outsiders_are_refused(app, path):
    response = get(app, path, OUTSIDE)
    assert response.status_int == 403
    assert "article.pdf" not in response.text  # nor does the page name the files


@pytest.mark.parametrize("remote", [INSIDE, "2001:12f0::1", f"::ffff:{INSIDE}"])
def test_insiders_get_the_files_and_their_list(app, remote):
    assert get(app, FILE, remote).status_int == 200
    page = get(app, FILELIST, remote)
    assert page.status_int == 200 and f"http://mtc-m16c.sid.inpe.br{FILE}" in page.text


def test_items_without_networks_are_open_to_all(app):
    assert get(app, OPEN_FILE, OUTSIDE).status_int == 200


def test_a_forwarded_address_from_an_untrusted_peer_is_ignored(app):
    assert get(app, FILE, OUTSIDE, forwarded=INSIDE).status_int == 403
    assert get(app, FILELIST, OUTSIDE, forwarded=INSIDE).status_int == 403


def test_a_trusted_proxys_forwarded_address_counts(app):
    # The default trusts the loopback proxy of contrib/: it forwards who it heard from.
    assert get(app, FILE, "127.0.0.1", forwarded=INSIDE).status_int == 200
    assert get(app, FILE, "127.0.0.1", forwarded=OUTSIDE).status_int == 403
    # A client that sends its own X-Forwarded-For: the proxy appends the real address, and
    # the rightmost address that is not a trusted proxy is the user.
    assert get(app, FILE, "127.0.0.1", forwarded=f"{INSIDE}, {OUTSIDE}").status_int == 403
    assert get(app, FILE, "127.0.0.1", forwarded=f"{OUTSIDE}, {INSIDE}").status_int == 200
    # Nothing usable forwarded: the user is unknown, and a licensed file is refused.
    assert get(app, FILE, "127.0.0.1", forwarded="not-an-address").status_int == 403


def test_trusted_proxies_is_configurable(settings):
    app = webtest.TestApp(create_app({**settings, "trusted_proxies": "10.0.0.0/8, 2001:db8::1"}))
    assert get(app, FILE, "10.1.2.3", forwarded=INSIDE).status_int == 200
    assert get(app, FILE, "2001:db8::1", forwarded=INSIDE).status_int == 200
    assert get(app, FILE, "127.0.0.1", forwarded=INSIDE).status_int == 403  # no longer trusted
    app = webtest.TestApp(create_app({**settings, "trusted_proxies": "none"}))
    assert get(app, FILE, "127.0.0.1", forwarded=INSIDE).status_int == 403


@pytest.mark.parametrize(
    "text, expected",
    [
        ("none", ()),
        ("127.0.0.1", ("127.0.0.1/32",)),
        ("10.0.0.0/8,  ::1", ("10.0.0.0/8", "::1/128")),
        ("['10.0.0.0/8', '192.168.1.0/24']", ("10.0.0.0/8", "192.168.1.0/24")),  # a YAML list
    ],
)
def test_trusted_proxies_setting_reads_addresses_and_networks(text, expected):
    config = settingsmod.load(options={"trusted_proxies": text}, environ={})
    assert config.trusted_proxies == expected


def test_trusted_proxies_setting_names_a_bad_entry():
    with pytest.raises(settingsmod.ConfigError, match="trusted_proxies.*10.0.0.300"):
        settingsmod.load(options={"trusted_proxies": "10.0.0.300"}, environ={})
