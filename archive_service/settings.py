"""The Archive's settings: one declared table drives the YAML file, the environment, --help
and the README check.

Precedence: command line > ARCHIVE_SERVICE_<KEY> environment > YAML file (--config) > default.
Unknown keys in the file warn (one line, with the nearest known key); a file that cannot be
used stops start-up with one line, and values that break their rules or required settings
that are missing stop it with one message listing every one of them.
"""

from __future__ import annotations

import difflib
import os
import stat
import textwrap
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import __version__, setting_values
from .common import logs
from .common.postgres import redacted as postgres_redacted
from .common.yamlsafe import SafeLoader, tab_hint
from .setting_values import (  # the public ones are settings.<name> for the resolver's table too
    ascii_text,
    bind_address,
    database_url,
    email_address,
    file_path,
    hostport,
    ibi_text,
    ip_address,
    networks,
    positive_int,
    registration_key,
)

# The table below (and a branch adding to it) names these as it always has.
_optional_ibi = setting_values.optional_ibi
_resolver = setting_values.resolver
_http_url = setting_values.http_url
_days_or_off = setting_values.days_or_off
_count_or_auto = setting_values.count_or_auto
_seconds = setting_values.seconds
_choice = setting_values.choice
_interval = setting_values.interval
_interval_or_off = setting_values.interval_or_off
_api_key = setting_values.api_key
_yes_no = setting_values.yes_no
_whole_seconds = setting_values.whole_seconds

ENV_PREFIX = "ARCHIVE_SERVICE_"
DEFAULT_RESOLVER = "http://urlib.net/J8LNKB5R7W/3FUQHC5"


class ConfigError(ValueError):
    """Settings or a config file that cannot be used. Each problem is one line naming the key,
    the rule it breaks and how to fix it; several are listed in one message, so that an admin
    fixes them all in one go rather than one per run."""

    def __init__(self, *problems: str):
        self.problems = tuple(problems)
        if len(problems) == 1:
            super().__init__(problems[0])
        else:
            super().__init__(
                f"{len(problems)} settings need fixing:\n"
                + "\n".join(f"  - {problem}" for problem in problems)
            )


class ConfigWarning(UserWarning):
    pass


def log_format(value: str) -> str:
    return _choice(*logs.FORMATS)(value)


SYSTEM_STATE_DIR = "/var/lib/archive-service"  # contrib/systemd's StateDirectory=


def default_state_dir() -> str:
    """systemd's StateDirectory when run as a service; else the per-user data directory
    ($XDG_DATA_HOME, or for root the service's own /var/lib/archive-service, so that a command
    an admin runs with sudo reads what the systemd service wrote, not /root/.local/share)."""
    if os.environ.get("STATE_DIRECTORY"):
        return os.environ["STATE_DIRECTORY"].split(":")[0]
    if os.environ.get("XDG_DATA_HOME"):
        return os.path.join(os.environ["XDG_DATA_HOME"], "archive-service")
    if os.geteuid() == 0:
        return SYSTEM_STATE_DIR
    return os.path.join(os.path.expanduser("~"), ".local", "share", "archive-service")


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str
    parse: Callable[[Any], Any] = str
    secret: bool = False
    path: bool = False  # relative paths in the YAML file are relative to the file
    env_prefix: str = ENV_PREFIX  # another program's table (the resolver's) has its own
    # How a value may appear in messages and logs (a URL without its password).
    shown: Callable[[str], str] = staticmethod(lambda value: value)

    @property
    def env(self) -> str:
        return self.env_prefix + self.name.upper()

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")


# The one meaning of metrics_allow, declared by the Archive's table and the resolver's alike.
METRICS_ALLOW = (
    ("127.0.0.0/8", "::1/128"),
    "addresses or networks that may read GET /metrics (Prometheus; the client as "
    "trusted_proxies decides it; 404 to anyone else; docs/metrics.md); none: no metrics "
    "kept or served",
    networks,
)


SETTINGS: tuple[Setting, ...] = (
    Setting("collection", None, "directory holding the items (required)", file_path, path=True),
    Setting(
        "archiveaddress",
        None,
        "host[:port] where this Archive is reached from the Internet; default: the bind "
        "address, for trying the Archive out (never announced to a resolver)",
        hostport,
    ),
    Setting(
        "archiveserviceibi",
        None,
        "IBI of this Archive's service; the service answers at /<archiveserviceibi>; "
        "default: one minted at the first start (from archiveaddress, or an IBIp from the IP) "
        "and kept in state_dir/archiveserviceibi",
        ibi_text,
    ),
    Setting("platformsoftware", "", "IBI of the platform software, or empty", _optional_ibi),
    Setting("archiveip", None, "IP address of the Archive, sent when announcing", ip_address),
    Setting(
        "archiveplatformversion",
        f"archive-service-{__version__}",
        "platform version sent when announcing (printable ASCII, blanks allowed inside)",
        ascii_text,
    ),
    Setting(
        "archiveadmemailaddress",
        None,
        "administrator's e-mail address, sent when announcing",
        email_address,
    ),
    Setting(
        "registrationkey",
        None,
        "registration key shared with the resolver (secret); without one, nothing is "
        "announced and the Archive joins no resolver",
        registration_key,
        secret=True,
    ),
    Setting(
        "registrationkey_file",
        None,
        "file holding the registration key, instead of registrationkey; under systemd the "
        "credential $CREDENTIALS_DIRECTORY/registrationkey is read when neither is given",
        file_path,
        path=True,
    ),
    Setting(
        "resolver",
        DEFAULT_RESOLVER,
        "resolver service base URL; the word none turns announcing off",
        _resolver,
    ),
    Setting(
        "exclusion_timeout",
        5.0,
        "seconds serve waits on stop for the resolver to answer the exclusionRequest "
        "before exiting anyway",
        _seconds,
    ),
    Setting(
        "url_base",
        None,
        "URL where an existing web server publishes the collection's files; "
        "default: this service serves them at http://<archiveaddress>/col/",
        _http_url,
    ),
    Setting(
        "file_offload",
        "none",
        "who sends the bytes of /col/ files: none (serve), x-accel-redirect (nginx, "
        "see contrib/nginx) or x-sendfile (Apache's mod_xsendfile); the service still "
        "decides which file and who may have it",
        _choice("none", "x-accel-redirect", "x-sendfile"),
    ),
    Setting(
        "state_dir",
        None,
        "writable directory for the service's own data; default $STATE_DIRECTORY under "
        "systemd, else $XDG_DATA_HOME/archive-service, else for root /var/lib/archive-service, "
        "else ~/.local/share/archive-service",
        file_path,
        path=True,
    ),
    Setting(
        "database",
        "",
        "where state several nodes share lives: empty for the embedded SQLite files in "
        "state_dir, or a postgresql://user@host/db URL (acknowledgments, statistics, the "
        "urlkey secret, the minting state, the resolver's registry); the password goes in a "
        "pgpass file (PGPASSFILE, e.g. a systemd credential), never in the URL",
        database_url,
        shown=postgres_redacted,
    ),
    Setting(
        "stats_retention_days",
        400,
        "days the uses COUNTER reports count are kept (hashed, never an address); "
        "0 keeps them for ever",
        _days_or_off,
    ),
    Setting(
        "counter_api_key",
        "",
        "key a harvester of the COUNTER API (/<archiveserviceibi>/r51/...) gives as api_key "
        "(secret); empty: the usage reports are public",
        _api_key,
        secret=True,
    ),
    Setting(
        "bind", "127.0.0.1:8080", "address serve listens on: HOST:PORT or unix:PATH", bind_address
    ),
    Setting(
        "trusted_proxies",
        ("127.0.0.0/8", "::1/128"),
        "addresses or networks of the reverse proxies whose X-Forwarded-For names the "
        "user (for licensed items, COUNTER's users, whose acknowledgments count); none "
        "trusts no proxy",
        networks,
    ),
    Setting(
        "resolver_networks",
        None,
        "addresses or networks whose acknowledgments count (the sender as trusted_proxies "
        "decides it); default: the resolver host's addresses, plus loopback when resolver "
        "is none or on loopback; none counts none",
        networks,
    ),
    Setting("metrics_allow", *METRICS_ALLOW),
    Setting("workers", 2, "number of gunicorn worker processes for serve", positive_int),
    Setting(
        "threads",
        16,
        "threads of each serve worker: each request, and each slow client, holds one "
        "while it lasts",
        positive_int,
    ),
    Setting(
        "page_concurrency",
        0,
        "pages (item list and search, statistics, COUNTER API, file lists) each serve "
        "worker makes at once, past which they are answered 503 Retry-After so the protocol "
        "keeps its threads and CPU; 0: one per 16 threads, always fewer than threads",
        _count_or_auto,
    ),
    Setting(
        "client_timeout",
        15,
        "seconds a client may take to send its request, or stay without reading while a "
        "response is sent, before serve drops the connection",
        positive_int,
    ),
    Setting(
        "log_format",
        "text",
        "how every process of the Archive logs: text (one line a record; no timestamp under "
        "systemd, which stamps each) or json (one object a line, access lines with their "
        "fields)",
        log_format,
    ),
    Setting(
        "index_watch",
        "auto",
        "how serve follows changes to the collection: auto (inotify where it works, else "
        "periodic rescans), poll (periodic rescans only) or off (read at start only)",
        _choice("auto", "poll", "off"),
    ),
    Setting(
        "rescan_interval",
        60.0,
        "seconds between rescans of the collection when it is not watched",
        _interval,
    ),
    Setting(
        "consistency_interval",
        3600.0,
        "seconds between full rescans while the collection is watched, repairing changes "
        "the kernel dropped; 0 turns them off",
        _interval_or_off,
    ),
    # What the kit fetches from elsewhere (issue 30): check --links and the OAI-PMH harvester.
    Setting(
        "allow_internal",
        False,
        "yes lets check --links and import oai-pmh's redirects reach internal addresses "
        "(loopback, link-local, private ranges); no (the default) names them as problems, "
        "never contacted; also --allow-internal",
        _yes_no,
    ),
    Setting(
        "oai_max_records",
        1_000_000,
        "records one import oai-pmh harvest takes at most; then it stops, keeping what it applied",
        positive_int,
    ),
    Setting(
        "oai_max_bytes",
        20_000_000_000,
        "bytes of responses one import oai-pmh harvest reads at most; then it stops, keeping "
        "what it applied",
        positive_int,
    ),
    Setting(
        "oai_max_seconds",
        86400.0,
        "seconds one import oai-pmh harvest may last; then it stops, keeping what it applied",
        _whole_seconds,
    ),
    Setting(
        "oai_max_retry_wait",
        3600.0,
        "seconds the waits a provider asks for (503 or 429 with Retry-After) may add up to "
        "in one import oai-pmh harvest; then it stops, keeping what it applied",
        _whole_seconds,
    ),
)
BY_NAME = {s.name: s for s in SETTINGS}


class Config(Mapping):
    """Validated settings; read them as attributes (`config.collection`) or as a mapping."""

    def __init__(
        self,
        values: Mapping[str, Any],
        sources: Mapping[str, str] | None = None,
        table: Mapping[str, Setting] | None = None,
    ):
        self._values = dict(values)
        self.sources = dict(sources or {})
        self._table = BY_NAME if table is None else table

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def require(self, *names: str) -> None:
        """ConfigError listing every one of `names` that is not set."""
        if problems := self.missing(*names):
            raise ConfigError(*problems)

    def missing(self, *names: str) -> list[str]:
        """A line for each of `names` that is not set: what it is and how to give it."""
        problems = []
        for name in names:
            if self._values.get(name) in (None, ""):
                setting = self._table[name]
                # Its meaning on its own, not in brackets: the help holds brackets of its own.
                problems.append(
                    f"setting {name} is missing, {setting.help.split(';')[0]}: give "
                    f"{setting.option}, {setting.env}, or '{name}:' in the --config file"
                )
        return problems

    def replace(self, values: Mapping[str, Any], sources: Mapping[str, str]) -> Config:
        """This config with `values` set (defaults filled in later), each from its source."""
        return Config({**self._values, **values}, {**self.sources, **sources}, self._table)

    def redacted(self) -> dict[str, Any]:
        return {
            k: ("<secret>" if self._table[k].secret and v else v) for k, v in self._values.items()
        }


def _warn_if_exposed(path: Path, secrets: list[str]) -> None:
    """A secret in a file every local user can read is a secret no more: say so at start-up."""
    if secrets and os.stat(path).st_mode & stat.S_IROTH:
        warnings.warn(
            f"config file {path} holds {', '.join(secrets)} and every user of this "
            f"machine can read it: chmod o-r {path}, or move the key to "
            f"registrationkey_file or a systemd credential",
            ConfigWarning,
            stacklevel=3,
        )


def read_file(
    path: str | os.PathLike, table: Mapping[str, Setting] | None = None
) -> dict[str, Any]:
    """The settings in a YAML config file; ConfigError (one line) if it cannot be used."""
    path = Path(path)
    text = b""
    try:
        with open(path, "rb") as stream:
            text = stream.read()
        data = yaml.load(text, Loader=SafeLoader)
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise ConfigError(
            f"config file {path} line {mark.line + 1}: {exc.problem}{tab_hint(text, mark)}"
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path}: not YAML ({exc})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: must be a map of setting: value")
    table = BY_NAME if table is None else table
    _warn_if_exposed(path, [k for k, v in data.items() if k in table and table[k].secret and v])
    values = {}
    for key, value in data.items():
        if key not in table:
            near = difflib.get_close_matches(str(key), list(table), n=1)
            warnings.warn(
                f"config file {path}: unknown setting {key!r} ignored"
                + (f" (did you mean {near[0]}?)" if near else ""),
                ConfigWarning,
                stacklevel=2,
            )
            continue
        if value is not None and table[key].path:
            value = (
                str((path.parent / str(value)).resolve())
                if not os.path.isabs(str(value))
                else str(value)
            )
        values[key] = value
    return values


def withdraw_secrets(
    table: tuple[Setting, ...] = SETTINGS, environ: os._Environ | None = None
) -> dict[str, str]:
    """Take the secret settings' variables (ARCHIVE_SERVICE_REGISTRATIONKEY) out of this
    process's environment and return them, so that no process started or forked from here on
    (workers, the indexer, the announcer) carries the key; the caller keeps them for `load`.

    Leaving os.environ is not enough on Linux: /proc/<pid>/environ shows the block the process
    was started with, which every fork copies; the variable is blanked there too."""
    environ = os.environ if environ is None else environ
    taken = {s.env: environ.pop(s.env) for s in table if s.secret and s.env in environ}
    if taken and environ is os.environ:
        _blank_start_environment(taken)
    return taken


def _blank_start_environment(names: Mapping[str, str]) -> None:
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # proc(5): env_start, env_end
        with open("/proc/self/mem", "r+b", buffering=0) as memory:
            memory.seek(start)
            block = memory.read(end - start)
            offset = 0
            for entry in block.split(b"\0"):
                name = entry.split(b"=", 1)[0]
                if name and os.fsdecode(name) in names:
                    memory.seek(start + offset)
                    memory.write(b"\0" * len(entry))
                offset += len(entry) + 1
    except (OSError, IndexError, ValueError):
        pass  # not Linux, or /proc unreadable: the variable has still left os.environ


def load(
    config_file: str | None = None,
    options: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    table: tuple[Setting, ...] = SETTINGS,
    required: tuple[str, ...] = (),
) -> Config:
    """Merge the four sources in order of precedence and validate every value; ConfigError
    listing every bad value and every missing one of `required`.

    `table` is the Archive's SETTINGS unless another program of the kit (the resolver) loads
    its own table through the same rules."""
    config, problems = collect(config_file, options, environ, table, required)
    if problems:
        raise ConfigError(*problems)
    return config


def collect(
    config_file: str | None = None,
    options: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    table: tuple[Setting, ...] = SETTINGS,
    required: tuple[str, ...] = (),
) -> tuple[Config, list[str]]:
    """`load`, but the problems are returned rather than raised, each bad value left at its
    default: a caller with rules of its own (serve's announcing) adds its problems to these
    and reports them all at once. A config file that cannot be read still raises."""
    environ = os.environ if environ is None else environ
    _warn_mistyped_environment(environ, table)
    problems: list[str] = []
    by_name = {s.name: s for s in table}
    options = {k: v for k, v in (options or {}).items() if v is not None}
    from_file = read_file(config_file, by_name) if config_file else {}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for setting in table:
        if setting.name in options:
            raw, source = options[setting.name], "command line"
        elif setting.env in environ:
            raw, source = environ[setting.env], f"environment {setting.env}"
        elif setting.name in from_file:
            raw, source = from_file[setting.name], f"config file {config_file}"
        else:
            values[setting.name], sources[setting.name] = setting.default, "default"
            continue
        if raw is None or raw == "":
            values[setting.name] = setting.default if raw is None else ""
        else:
            try:
                values[setting.name] = setting.parse(str(raw))
            except (ValueError, TypeError) as exc:
                shown = "<secret>" if setting.secret else repr(setting.shown(str(raw)))
                problems.append(f"setting {setting.name} = {shown} ({source}): {exc}")
                values[setting.name], sources[setting.name] = setting.default, "default"
                continue
        sources[setting.name] = source
    if "state_dir" in values and values["state_dir"] is None:
        values["state_dir"] = default_state_dir()
    for setting in table:
        if setting.path and values[setting.name]:
            values[setting.name] = os.path.abspath(values[setting.name])
    config = Config(values, sources, by_name)
    return config, problems + config.missing(*required)


# ARCHIVE_SERVICE_* variables that are no setting of the Archive's table, yet no typo: the
# WSGI entry's config file, the resolver's own table, the tests' and the benchmark's.
_OTHER_VARIABLES = ("CONFIG",)
_OTHER_PREFIXES = ("RESOLVER_", "TEST_", "BENCH_")


def _warn_mistyped_environment(environ: Mapping[str, str], table: tuple[Setting, ...]) -> None:
    """A warning for each variable of the table's prefix that is none of its settings but
    close to one: ARCHIVE_SERVICE_COLECTION was silently ignored, and the admin read only
    'setting collection is missing'."""
    prefix = table[0].env_prefix if table else ENV_PREFIX
    known = {s.env[len(prefix) :]: s.env for s in table}
    for name in environ:
        upper = name.upper()  # archive_service_collection is a mistake of case
        rest = upper[len(prefix) :]
        if (
            not upper.startswith(prefix)
            or (name == upper and rest in known)
            or rest in _OTHER_VARIABLES
            or rest.startswith(_OTHER_PREFIXES)
        ):
            continue
        near = [rest] if rest in known else difflib.get_close_matches(rest, known, 1, 0.8)
        if near:
            warnings.warn(
                f"environment variable {name} is no setting and is ignored "
                f"(did you mean {known[near[0]]}?)",
                ConfigWarning,
                stacklevel=3,
            )


def example_file(values: Mapping[str, Any], table: tuple[Setting, ...] = SETTINGS) -> str:
    """A commented YAML settings file listing every setting of `table` with its meaning:
    those in `values` set, every other one commented out at its default, and a secret never
    written (its `*_file` setting holds the path of a file holding it)."""
    lines = [
        f"# archive-service {__version__} settings, written by `archive-service init`.",
        "# Every setting is listed; a commented one keeps its default. Precedence: the command",
        f"# line, then {ENV_PREFIX}<NAME> in the environment, then this file, then the default.",
        "# Relative paths are relative to this file. `archive-service serve --help` says more.",
    ]
    for setting in table:
        lines.append("")
        lines += textwrap.wrap(setting.help, 92, initial_indent="# ", subsequent_indent="# ")
        if setting.secret:
            names = {s.name for s in table}
            instead = (
                f"{setting.name}_file"
                if f"{setting.name}_file" in names
                else f"it in the environment ({setting.env})"
            )
            lines.append(
                f"# {setting.name}: never here, this file is read by more than the service: "
                f"give {instead}"
            )
            continue
        if setting.name in values:
            lines.append(_yaml_line(setting.name, values[setting.name]))
            continue
        default = setting.default
        if setting.name == "state_dir":  # named explicitly, so every command reads the same
            default = default_state_dir()
        lines.append(
            "# " + (f"{setting.name}:" if default is None else _yaml_line(setting.name, default))
        )
    return "\n".join(lines) + "\n"


def _yaml_line(name: str, value: Any) -> str:
    value = list(value) if isinstance(value, tuple) else value
    return yaml.safe_dump({name: value}, default_flow_style=True, width=200)[1:-2].strip()
