"""The pages' languages (issue 32): English (the source strings) and Brazilian Portuguese.

Flask-Babel chooses a request's locale: `?lang=` (the visible switch's links, which also set
the `lang` cookie for a year), else that cookie, else the best of `Accept-Language` (any
Portuguese is pt-BR), else English. The catalogs live in `archive_service/translations/`,
compiled (`.mo`) beside their sources (`.po`) so that a `pip install .`, a CGI program and a
mod_wsgi daemon translate with no build step (ARCHITECTURE.md says how to update them).
Dates, numbers and sizes on the pages are formatted for the locale by Babel (CLDR).

Only pages are translated: the protocol's text/plain answers are the protocol, and the CLI's
messages and the logs stay English (they are read by admins, and searched for)."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlencode

from babel.dates import format_datetime
from babel.units import format_unit
from flask import Flask, Response, g, request, url_for
from flask_babel import Babel, format_decimal, get_locale, lazy_gettext
from werkzeug.datastructures import LanguageAccept
from werkzeug.http import parse_accept_header, parse_cookie

TRANSLATIONS = Path(__file__).resolve().parent.parent / "translations"
# BCP 47 tag (lang, hreflang, Content-Language, ?lang=, the cookie) -> Babel's locale name.
LOCALES = {"en": "en", "pt-BR": "pt_BR"}
TAGS = {locale: tag for tag, locale in LOCALES.items()}
NAMES = {"en": "English", "pt-BR": "Português (Brasil)"}  # each in its own language
COOKIE = "lang"
COOKIE_DAYS = 365
SIZE_UNITS = ("byte", "kilobyte", "megabyte", "gigabyte", "terabyte", "petabyte")


def switched(req=None) -> str | None:
    """The language the page's switch asked for (`?lang=`), None when none; a query of raw
    bytes that are not UTF-8 asks for none (its 400 page is still said in a language).
    `req`: a Werkzeug request read outside Flask (default: Flask's)."""
    try:
        return (request if req is None else req).args.get(COOKIE)
    except UnicodeDecodeError:
        return None


def chosen_locale(req=None) -> str:
    """The request's locale: the switch, its cookie, then Accept-Language (Flask-Babel's
    locale_selector; read once per request). `req`: a Werkzeug request read outside Flask
    (the resolver's redirects: their Content-Language)."""
    req = request if req is None else req
    asked = switched(req)
    if asked in LOCALES:
        return LOCALES[asked]
    cookie, accept_language = req.headers.get("Cookie"), req.headers.get("Accept-Language")
    if len(cookie or "") + len(accept_language or "") > REMEMBERED:
        return _headers_locale.__wrapped__(cookie, accept_language)
    return _headers_locale(cookie, accept_language)


# The longest header values whose locale is remembered: a browser's are far shorter, and
# 1,024 pairs of 8 KB values rotated by a client kept 16.8 MB a worker.
REMEMBERED = 1024


@lru_cache(maxsize=1024)
def _headers_locale(cookie: str | None, accept_language: str | None) -> str:
    """The locale the `lang` cookie, then Accept-Language, choose. Remembered for the last
    header values seen (short ones: `REMEMBERED`): browsers send a handful, and parsing them
    was two thirds of what a resolver's redirect spent on its Content-Language (issue 35)."""
    asked = parse_cookie(cookie).get(COOKIE) if cookie else None
    if asked in LOCALES:
        return LOCALES[asked]
    # Werkzeug falls back to primary tags: pt-PT matches our "pt", which is pt-BR, our one
    # Portuguese.
    accepted = parse_accept_header(accept_language, LanguageAccept)
    best = accepted.best_match((*LOCALES, "pt"), default="en")
    return LOCALES.get(best, "pt_BR")


def tag() -> str:
    """The BCP 47 tag of the request's locale (`<html lang>`)."""
    return TAGS.get(str(get_locale()), "en")


# The words of a page depend on these two request headers: a cache must keep each apart.
LANGUAGE_VARY = ("Accept-Language", "Cookie")


def page_language(req=None) -> str:
    """The Content-Language of an HTML response to `req` (a Werkzeug request read outside
    Flask; default: Flask's)."""
    return tag() if req is None else TAGS[chosen_locale(req)]


def language_headers(response, req=None) -> None:
    """An HTML response's language and what it depends on (`req`: a Werkzeug request read
    outside Flask; default: Flask's). The resolver's redirect writes the same fields without
    a response object (resolver/redirects.py). A collection's file says nothing of the
    pages' language (`pages_language`, web/download.py)."""
    if response.mimetype == "text/html" and getattr(response, "pages_language", True):
        response.vary.update(LANGUAGE_VARY)
        response.content_language.add(page_language(req))


def human_size(size: int) -> str:
    """A size in bytes for people in the request's locale: "1.2 MB", pt-BR "1,2 MB"
    (decimal units, as file managers show them); under 1 kB "10 bytes", "1 byte"; the number
    and its unit joined by a no-break space."""
    value, unit = float(size), SIZE_UNITS[0]
    for unit in SIZE_UNITS:  # noqa: B007 - the last unit reached is the one shown
        if value < 1000 or unit == SIZE_UNITS[-1]:
            break
        value /= 1000
    if unit == "byte":
        # CLDR's short byte has no plural in English ("10 byte") and no singular in pt-BR
        # ("1 bytes"); its long name has both ("10 bytes", "1 byte") at the same length.
        said = format_unit(int(value), "digital-byte", "long", "#,##0", locale=get_locale())
    else:
        said = format_unit(
            round(value, 1), f"digital-{unit}", "short", "#,##0.#", locale=get_locale()
        )
    # A no-break space: on a phone "2,5" ended one line and "kB)" began the next.
    return said.replace(" ", "\u00a0")


def when(value: datetime | str | float | None, style: str = "medium") -> str:
    """A time (a datetime, an ISO 8601 string or POSIX seconds) in the request's locale, in
    UTC as the pages say; "" for none. A time that is not one is shown as given."""
    if value is None or value == "":
        return ""
    try:
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        elif not isinstance(value, datetime):
            value = datetime.fromtimestamp(value, UTC)
    except (ValueError, OverflowError, OSError):
        return str(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    # Babel's own, not Flask-Babel's (which looks up the app's timezone on every call): a
    # page of 50 items writes 50 dates.
    return format_datetime(value, style, tzinfo=UTC, locale=get_locale())


# An item's state or content type (the protocol's words), or an inclusion's state
# (common/inclusion.py), for people; lazy: each is translated when shown, one at a time.
TERMS = {
    "Original": lazy_gettext("Original"),
    "Copy": lazy_gettext("Copy"),
    "Deleted": lazy_gettext("Deleted"),
    "Data": lazy_gettext("Data"),
    "Metadata": lazy_gettext("Metadata"),
    "not-joined": lazy_gettext("not joined"),
    "announcing": lazy_gettext("announcing"),
    "included": lazy_gettext("included"),
    "unconfirmed": lazy_gettext("unconfirmed"),
    "excluded": lazy_gettext("excluded"),
    "failed": lazy_gettext("failed"),
    "left": lazy_gettext("left"),
    "standby": lazy_gettext("standby"),
}


def term(word: str) -> str:
    """A word of TERMS in the request's language; any other as it is."""
    found = TERMS.get(word)
    return str(found) if found is not None else word


def elsewhere() -> None:
    """Say that this request's page is not the page at its URL (an error's page): its switch
    links home and it names no alternates (an error page echoed the path of a file refused)."""
    g.archive_service_elsewhere = True


def _own_page(foreign: tuple[str, ...]) -> bool:
    endpoint = request.endpoint
    return (
        endpoint is not None and endpoint not in foreign and not g.get("archive_service_elsewhere")
    )


def switch_url(language: str, home: str | None, foreign: tuple[str, ...]) -> str:
    """This page in `language` (the switch's link; `?lang=` also sets the cookie), or the page
    `home` when this one is not the app's to change: an error page, or a page whose query
    belongs to someone else (`foreign`: the resolver's persistent URLs, the item's query)."""
    endpoint, args = request.endpoint, request.view_args
    if _own_page(foreign) and args is not None:
        return url_for(endpoint, **args, **{**request.args.to_dict(), COOKIE: language})
    if home is not None:
        return url_for(home, **{COOKIE: language})
    return "?" + urlencode({COOKIE: language})


def install(app: Flask, home: str | None = None, foreign: tuple[str, ...] = ()) -> None:
    """Translate `app`'s pages (before its templates are compiled: Flask-Babel adds Jinja's
    i18n extension). The language switch links to the same page, or to `home` from error
    pages and the `foreign` endpoints (see `switch_url`)."""
    app.config.setdefault("BABEL_DEFAULT_LOCALE", "en")
    app.config.setdefault("BABEL_DEFAULT_TIMEZONE", "UTC")
    Babel(app, locale_selector=chosen_locale, default_translation_directories=str(TRANSLATIONS))
    env = app.jinja_env
    env.filters["size"] = human_size
    env.filters["when"] = when
    env.filters["number"] = lambda n: format_decimal(n)
    env.filters["term"] = term

    def languages() -> list[dict]:
        current = tag()
        # `own`: the page itself in each language (its <link rel="alternate" hreflang>), not
        # an error page's way home.
        own = _own_page(foreign)
        return [
            {
                "tag": t,
                "name": NAMES[t],
                "current": t == current,
                "url": switch_url(t, home, foreign),
                "own": own,
            }
            for t in LOCALES
        ]

    @app.context_processor
    def language_context() -> dict:
        return {"html_lang": tag(), "languages": languages}

    @app.after_request
    def remember_language(response: Response) -> Response:
        language_headers(response)
        asked = switched()
        if asked in LOCALES and request.cookies.get(COOKIE) != asked:
            response.set_cookie(
                COOKIE,
                asked,
                max_age=COOKIE_DAYS * 86400,
                path=(request.script_root or "") + "/",
                samesite="Lax",
                httponly=True,
            )
        return response
