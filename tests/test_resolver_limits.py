"""The resolver refuses a request whose header fields break the Archive's limits
(common/limits.py), before it reads them. gunicorn takes 100 fields of 8190 bytes and joins
fields of one name with commas (gunicorn/http/wsgi.py): 100 `Accept-Language` fields reached
the app as one 800 KB value, parsed twice (0.5 s of CPU a request) and kept as a key of the
locale cache (common/i18n.py, 1,024 entries: 0.8 MB a request, 80 MB a worker after 100)."""

from __future__ import annotations

import pytest
import webtest

from archive_service.common import i18n, limits
from archive_service.resolver.app import create_resolver_app

# What gunicorn hands the app for 100 fields of one name, each as long as it takes one.
JOINED = ",".join(["a;" * (limits.MAX_HEADER_FIELD // 2 - 20)] * limits.MAX_HEADER_FIELDS)


@pytest.fixture(scope="module")
def resolver(tmp_path_factory):
    state = tmp_path_factory.mktemp("state")
    return webtest.TestApp(create_resolver_app({"state_dir": str(state), "timeout": "1"}))


@pytest.mark.parametrize("header", ["HTTP_ACCEPT_LANGUAGE", "HTTP_COOKIE", "HTTP_VIA"])
@pytest.mark.parametrize("path", ["/", "/LK47B6W/362SFKH", "/nothing/here"])
def test_joined_header_fields_longer_than_one_field_are_refused(resolver, header, path):
    cached = i18n._headers_locale.cache_info().currsize
    response = resolver.get(path, extra_environ={header: JOINED}, status="*")
    assert response.status_int == 400
    assert response.text.strip() == (f"header field longer than {limits.MAX_HEADER_FIELD} bytes")
    assert "\n" not in response.text.strip()
    assert i18n._headers_locale.cache_info().currsize == cached  # nothing of it kept


def test_too_many_header_fields_are_refused(resolver):
    many = {f"HTTP_X_H{i}": "v" for i in range(limits.MAX_HEADER_FIELDS + 1)}
    assert resolver.get("/", extra_environ=many, status="*").status_int == 400


def test_ordinary_headers_and_long_persistent_url_queries_still_pass(resolver):
    # The resolver's own rule is the header fields': a persistent URL's query is the item's
    # (passed on to it), longer than an Archive's 4096 bytes if the item wants.
    ok = resolver.get("/", headers={"Accept-Language": "pt-BR,en;q=0.5"})
    assert ok.status_int == 200 and ok.headers["Content-Language"] == "pt-BR"
    query = "x=" + "a" * (limits.MAX_QUERY_STRING + 10)
    short = resolver.get("/LK47B6W/362SFKH?x=a", status="*").status_int
    assert short != 400
    assert resolver.get("/LK47B6W/362SFKH?" + query, status="*").status_int == short


def test_long_header_values_choose_a_locale_but_are_not_remembered(resolver):
    # One field each, within the limits: a client rotating 8 KB values kept 16 KB a request
    # in the locale cache (1,024 entries) of every worker, the Archive's too.
    cached = i18n._headers_locale.cache_info().currsize
    for i in range(3):
        long_language = f"x{i}," + "a;q=0.1," * 900 + "pt-BR"
        page = resolver.get("/", headers={"Accept-Language": long_language})
        assert page.headers["Content-Language"] == "pt-BR"
        cookie = f"x{i}=1; lang=pt-BR; " + "c=d; " * 1500
        assert resolver.get("/", headers={"Cookie": cookie}).headers["Content-Language"] == "pt-BR"
    assert i18n._headers_locale.cache_info().currsize == cached


def test_long_persistent_urls_are_resolved_but_not_remembered(resolver):
    # Parsed persistent URLs were kept whatever their length (512 of them): a client asking
    # 9 KB file paths, each once, kept 9.6 MB a worker (the tenth adversarial pass).
    from archive_service.resolver import purl

    cached = purl._kept.cache_info().currsize
    for i in range(3):
        long_path = f"/LK47B6W/362SFKH/{i}" + "a%C3%A9" * 1000
        assert resolver.get(long_path, status="*").status_int in (404, 502, 503)
    assert purl._kept.cache_info().currsize == cached
    resolver.get("/LK47B6W/362SFKH/short.pdf", status="*")
    assert purl._kept.cache_info().currsize == cached + 1
