"""The resolver's settings: its own table, loaded by the same rules as the Archive's.

Command line > ARCHIVE_SERVICE_RESOLVER_<KEY> environment > YAML --config > default.
"""

from __future__ import annotations

from .. import settings
from ..settings import Setting

ENV_PREFIX = "ARCHIVE_SERVICE_RESOLVER_"
DEFAULT_IBI = "J8LNKB5R7W/3FUQHC5"  # urlib.net's own service IBI (SPEC §1)
REGISTRY_FILE = "resolver-registry.sqlite3"
ANSWERED_FILE = "resolver-answered.sqlite3"  # resolver/stores/answered/sqlite.py


def _positive_float(value: str) -> float:
    number = float(value)
    if not number > 0:
        raise ValueError("must be a number of seconds above 0")
    return number


def _seconds_or_off(value: str) -> float:
    number = float(value)
    if not 0 <= number < float("inf"):
        raise ValueError("must be a number of seconds, 0 or more")
    return number


def _optional_hostport(value: str) -> str:
    return settings.hostport(value) if value else ""


_P = ENV_PREFIX
RESOLVER_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "state_dir",
        None,
        f"writable directory holding the registry ({REGISTRY_FILE}) and, without "
        f"database, the Archives that answered for each IBI ({ANSWERED_FILE}); "
        "default $STATE_DIRECTORY under systemd, else ~/.local/share/archive-service",
        settings.file_path,
        path=True,
        env_prefix=_P,
    ),
    Setting(
        "database",
        "",
        "where the registry and the Archives that answered for each IBI live: empty for "
        "the SQLite files in state_dir, or a "
        "postgresql://user@host/db URL shared by several resolver instances; the password "
        "goes in a pgpass file (PGPASSFILE), never in the URL",
        settings.database_url,
        shown=settings.postgres_redacted,
        env_prefix=_P,
    ),
    Setting(
        "bind",
        "127.0.0.1:8090",
        "address the resolver listens on: HOST:PORT or unix:PATH",
        settings.bind_address,
        env_prefix=_P,
    ),
    Setting(
        "resolveribi",
        DEFAULT_IBI,
        "IBI of the resolver's own service; inclusion and exclusion are answered at /<resolveribi>",
        settings.ibi_text,
        env_prefix=_P,
    ),
    Setting(
        "address",
        "",
        "host[:port] users reach the resolver at, for url.persistent in "
        "acknowledgments; default: the bind address",
        _optional_hostport,
        env_prefix=_P,
    ),
    Setting(
        "timeout", 5.0, "seconds to wait for each Archive's answer", _positive_float, env_prefix=_P
    ),
    Setting(
        "rounds",
        10,
        "most urlRequest rounds for one persistent URL (next editions, "
        "related items held elsewhere)",
        settings.positive_int,
        env_prefix=_P,
    ),
    Setting(
        "answered_ttl",
        300.0,
        "seconds the Archives that answered for an IBI are remembered and asked first "
        "(0: never, every resolution asks every Archive); an Archive that starts holding "
        "an IBI already remembered elsewhere is asked once the entry expires",
        _seconds_or_off,
        env_prefix=_P,
    ),
    Setting(
        "ack_queue",
        10000,
        "acknowledgments waiting to be sent, per worker; they are sent after the redirect, "
        "and one more is dropped (counted on /health, logged)",
        settings.positive_int,
        env_prefix=_P,
    ),
    Setting(
        "trusted_proxies",
        ("127.0.0.0/8", "::1/128"),
        "addresses or networks of the reverse proxies whose X-Forwarded-For names the user "
        "(clientinformation.ipaddress sent to Archives, whom wrong keys are counted against), "
        "by the Archive's rule; none trusts no proxy",
        settings.networks,
        env_prefix=_P,
    ),
    Setting(
        "log_format",
        "text",
        "how the resolver logs: text (one line a record) or json (one object a line)",
        settings.log_format,
        env_prefix=_P,
    ),
    Setting("metrics_allow", *settings.METRICS_ALLOW, env_prefix=_P),
    Setting("workers", 1, "gunicorn worker processes", settings.positive_int, env_prefix=_P),
    Setting(
        "threads",
        16,
        "threads per worker (a resolution waits on the Archives)",
        settings.positive_int,
        env_prefix=_P,
    ),
)
BY_NAME = {s.name: s for s in RESOLVER_SETTINGS}


def load(config_file: str | None = None, options=None, environ=None) -> settings.Config:
    return settings.load(config_file, options, environ, table=RESOLVER_SETTINGS)
