"""The settings' values: each parser takes one setting's text (from the YAML file, the
environment or the command line) and gives its value, or raises ValueError saying what is
wrong; settings.py's SETTINGS table names one per setting and words the error as one line."""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from .protocol import ibi as ibimod


def hostport(value: str) -> str:
    # The address goes into URLs handed to users and into Host headers: an '@', '#', '?',
    # space or non-ASCII letter there names another host, or none, to some reader of it.
    if not value.isascii():
        raise ValueError("must be ASCII (an internationalized name in its xn-- form)")
    # Braces too: the address is a word of every answer (Table 4.2), which has none.
    if not value.isprintable() or any(c in value for c in " @#?/\\{}"):
        raise ValueError("must be host[:port] with no scheme or path, e.g. archive.example.org")
    try:
        parts = urlsplit("//" + value)
    except ValueError:  # an unclosed '['
        raise ValueError(
            "must be host[:port], e.g. archive.example.org or [2001:db8::1]:8080"
        ) from None
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:  # port 0 is no port to connect to (the client would take 80)
        raise ValueError("the port must be a number from 1 to 65535")
    if not parts.hostname:
        raise ValueError("must be host[:port] with no scheme or path, e.g. archive.example.org")
    return value if port is None or port != 80 else value.rsplit(":", 1)[0]


def ibi_text(value: str) -> str:
    try:
        return ibimod.parse(value).text
    except ibimod.IbiError as exc:
        raise ValueError(str(exc)) from None


def optional_ibi(value: str) -> str:
    return ibi_text(value) if value else ""


def ip_address(value: str) -> str:
    return str(ipaddress.ip_address(value))


def networks(value: str) -> tuple[str, ...]:
    # Commas or spaces between entries; a YAML list arrives as its str(): brackets, quotes.
    words = re.findall(r"[^\s,\[\]'\"]+", value)
    if words == ["none"]:
        return ()
    found = []
    for word in words:
        try:
            network = ipaddress.ip_network(word, strict=False)
        except ValueError:
            raise ValueError(
                f"{word} is neither an IP address nor a network such as 10.0.0.0/8"
            ) from None
        found.append(str(as_ipv4(network)))
    return tuple(found)


def as_ipv4(network):
    """An IPv4-mapped network (::ffff:192.0.2.0/120) as the IPv4 one it names: clients'
    addresses are compared as IPv4 (common/net.py), so it would otherwise match none."""
    mapped = network.network_address.ipv4_mapped if network.version == 6 else None
    if mapped is None or network.prefixlen < 96:
        return network
    return ipaddress.ip_network(f"{mapped}/{network.prefixlen - 96}")


def ascii_text(value: str) -> str:
    """An ASCII sequence (seed 000 Tab. 5.2, §4.1): printable characters, blanks included
    (a request carries a blank as %20), but not blank alone nor blank at either end."""
    if not value.strip():
        raise ValueError("must not be empty or blank")
    if not all(" " <= char <= "~" for char in value):
        raise ValueError("must be printable ASCII (letters, digits, punctuation and blanks)")
    if value != value.strip():
        raise ValueError("must not begin or end with a blank")
    return value


def email_address(value: str) -> str:
    if not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", value) or not value.isascii():
        raise ValueError("must be an e-mail address such as admin@example.org")
    return value


def registration_key(value: str) -> str:
    if not re.fullmatch(r"[0-9]{10,}(?:-[0-9]{10,})?", value):
        raise ValueError("must be 10 or more digits, optionally '-' and 10 or more digits")
    return value


def resolver(value: str) -> str:
    if value.lower() == "none":
        return "none"
    return http_url(value)


def http_url(value: str) -> str:
    # url_base begins every url pair of the answers, which are words of Table 4.2: a blank,
    # a brace or a non-ASCII letter made each answer no list of pairs (or a 400).
    if not value.isascii() or any(c.isspace() or c in "{}" or not c.isprintable() for c in value):
        raise ValueError("must be an ASCII URL with no blank or brace (percent-encode them)")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be an http:// or https:// URL")
    return value.rstrip("/")


def bind_address(value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        if value.startswith("unix:"):
            return value
        raise ValueError("must be HOST:PORT (e.g. 127.0.0.1:8080) or unix:PATH")
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        # gunicorn splits an unbracketed one at its first colon, then fails to start
        raise ValueError(f"an IPv6 address goes in brackets: [{host}]:{port}")
    return value


def positive_int(value: Any) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ValueError("must be a whole number, 1 or more") from None
    if number < 1:
        raise ValueError("must be 1 or more")
    return number


def days_or_off(value: Any) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise ValueError("must be a whole number of days, 0 (keep for ever) or more")
    return number


def count_or_auto(value: Any) -> int:
    if str(value).strip() == "0":
        return 0
    try:
        return positive_int(value)
    except ValueError:
        raise ValueError("must be a whole number: 0 (chosen from threads) or more") from None


def seconds(value: Any) -> float:
    number = float(value)
    if not 0 < number <= 3600:
        raise ValueError("must be a number of seconds, more than 0 and at most 3600")
    return number


def choice(*options: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in options:
            raise ValueError(f"must be one of {', '.join(options)}")
        return value

    return parse


def interval(value: Any) -> float:
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not number >= 0.1 or number == float("inf"):
        raise ValueError("must be a number of seconds, 0.1 or more")
    return number


def interval_or_off(value: Any) -> float:
    return 0.0 if str(value).strip() in ("0", "0.0") else interval(value)


def database_url(value: str) -> str:
    """Empty (the embedded SQLite files) or a PostgreSQL URL, as libpq takes it."""
    value = str(value).strip()
    if not value:
        return value
    if not value.startswith(("postgresql://", "postgres://")):
        raise ValueError("must be empty (SQLite in state_dir) or a postgresql://… URL")
    parts = urllib.parse.urlsplit(value)
    # libpq decodes the query's names too: `?pass%77ord=…` is a password it uses (and echoes
    # in its errors, which the pool logs), so the names are looked at decoded.
    names = {name for name, _ in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)}
    if parts.password is not None or "password=" in value or names & {"password", "sslpassword"}:
        raise ValueError(
            "holds a password: put it in a pgpass file named by PGPASSFILE (a systemd "
            "credential under the unit), so that it is never written in settings or logs"
        )
    return value


def api_key(value: str) -> str:
    if value and not re.fullmatch(r"[A-Za-z0-9._~-]{16,}", value):
        raise ValueError(
            "must be empty (the COUNTER API is public) or 16 or more letters, digits, "
            "'.', '_', '~' or '-' (it travels in a query string)"
        )
    return value


def file_path(value: str) -> str:
    if not str(value).strip():
        raise ValueError("must be a path")
    return str(value)


def yes_no(value: Any) -> bool:
    text = str(value).strip().lower()
    if text in ("yes", "true", "on", "1"):
        return True
    if text in ("no", "false", "off", "0"):
        return False
    raise ValueError("must be yes or no")


def whole_seconds(value: Any) -> float:
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not 1 <= number < float("inf"):
        raise ValueError("must be a number of seconds, 1 or more")
    return number
