"""Who the Archive is when its settings do not say: `archiveaddress` from the bind address,
and `archiveserviceibi` minted once and kept in the state dir (issue 18).

`archive-service serve --collection DIR` then starts and answers with no other setting. The
service IBI is the Archive's identity (§7.1: its service is an intransferable Original item):
minted once, from the address (a repository name, ID Algorithms 1-4) or, when the address is
no domain name, from the IP (an IBIp, Algorithms 5-7), it is read back from the state dir on
every later start, whatever the address has become since.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

from .. import settings
from ..common import files, inclusion
from ..common.net import host_port, is_loopback_host
from ..deposit import mint as mintmod
from ..protocol import ibi as ibimod

SERVICE_FILE = "archiveserviceibi"  # in state_dir: the minted service IBI, one line
# Beside it while that IBI was minted on a trial run (the bind address, or a loopback one): the
# address it was minted from. Such an IBI is minted again from the real address once the admin
# gives one, as long as no resolver has been told of it (issue 34).
TRIAL_FILE = "archiveserviceibi.trial"
ANNOUNCED = "announced"  # after the address in TRIAL_FILE: a resolver was told of that IBI
BIND_SOURCE = "default: the bind address"
MINTED_SOURCE = "minted"
KEPT_SOURCE = "state_dir"
REMINTED_SOURCE = "reminted"  # "reminted <trial IBI> <path>": that IBI replaced
TRIAL_KEPT_SOURCE = "trial"  # "trial <trial address> <path>": minted there, announced, kept


def address_of_bind(bind: str) -> str:
    """The host[:port] the bind address is reached at: itself, the machine's name when bound
    to every address, localhost for a unix socket (behind a web server on this machine)."""
    if bind.startswith("unix:"):
        return "localhost"
    host, _, port = bind.rpartition(":")
    host = host.strip("[]")
    try:
        if ipaddress.ip_address(host).is_unspecified:
            host = socket.getfqdn()
    except ValueError:
        pass
    if ":" in host:
        host = f"[{host}]"
    return settings.hostport(f"{host}:{port}")


def is_trial_address(config: settings.Config) -> bool:
    """Whether archiveaddress is one no resolver is told of: defaulted from the bind
    address, or naming this machine only."""
    host, _ = host_port(config.archiveaddress)
    return address_defaulted(config) or is_loopback_host(host or "localhost")


def address_defaulted(config: settings.Config) -> bool:
    """Whether archiveaddress is the bind address's rather than the admin's."""
    return config.sources.get("archiveaddress") == BIND_SOURCE


def with_address(config: settings.Config) -> settings.Config:
    """`config` with archiveaddress set: the admin's, else the bind address's."""
    if config.archiveaddress:
        return config
    return config.replace(
        {"archiveaddress": address_of_bind(config.bind)}, {"archiveaddress": BIND_SOURCE}
    )


def with_service_ibi(config: settings.Config, problems: list[str]) -> settings.Config:
    """`config` with archiveserviceibi set: the admin's, else the one kept in state_dir, else
    a new one minted and kept there; a line in `problems` if none can be had."""
    if config.archiveserviceibi:
        return config
    if config.get("database"):
        # Nodes sharing a database are one Archive; a minted IBI would be each node's own.
        problems.append(
            "setting archiveserviceibi is missing: nodes that share a database are one "
            "Archive and must all give the same archiveserviceibi (none is minted then)"
        )
        return config
    path = Path(config.state_dir) / SERVICE_FILE
    try:
        service, source = kept(path), KEPT_SOURCE
        if service is not None:
            service, source = _past_trial(config, path, service)
        if service is None:
            replaced = source
            service, source = _mint_once(config, path)
            if source == MINTED_SOURCE and replaced.startswith(REMINTED_SOURCE):
                source = replaced
    except (OSError, ValueError, mintmod.MintError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        problems.append(
            f"setting archiveserviceibi is missing and none could be kept in {path} ({reason}): "
            f"give archiveserviceibi, or make state_dir {config.state_dir} writable"
        )
        return config
    return config.replace({"archiveserviceibi": service}, {"archiveserviceibi": f"{source} {path}"})


def kept(path: Path) -> str | None:
    """The service IBI kept at `path`, None if there is none; ValueError if it is not one."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise ValueError(f"{path} does not hold an IBI") from None
    try:
        return settings.ibi_text(text)
    except ValueError as exc:
        raise ValueError(f"{path} holds {text!r}, not an IBI ({exc})") from None


def _past_trial(config: settings.Config, path: Path, service: str) -> tuple[str | None, str]:
    """The kept `service` IBI and its source, or (None, source) when it was minted on a trial
    run that no resolver was told of and the admin has since given a real address: it is then
    removed, to be minted again from that address. Once announced, an identity is kept."""
    trial = path.with_name(TRIAL_FILE)
    try:
        minted_from, _, announced = trial.read_text(encoding="utf-8").strip().partition(" ")
    except FileNotFoundError:
        return service, KEPT_SOURCE
    if is_trial_address(config):
        return service, KEPT_SOURCE
    told = inclusion.read(config.state_dir)
    if announced or (told is not None and told.state != "not-joined"):
        if not announced:  # for good: inclusion.json says only what happened last
            files.replace_file(trial, f"{minted_from} {ANNOUNCED}\n")
        return service, f"{TRIAL_KEPT_SOURCE} {minted_from or '?'}"
    path.unlink(missing_ok=True)
    trial.unlink(missing_ok=True)
    return None, f"{REMINTED_SOURCE} {service}"


def _mint_once(config: settings.Config, path: Path) -> tuple[str, str]:
    """Mint the service IBI and keep it at `path`; if another process kept one first, that
    one (the file is linked into place whole, never written over). Minted from a trial
    address, it is marked so (TRIAL_FILE) before it is put in place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    service = mint_service_ibi(config)
    if is_trial_address(config):
        files.replace_file(path.with_name(TRIAL_FILE), config.archiveaddress + "\n")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    files.write_new(temporary, service + "\n")
    try:
        os.link(temporary, path)
    except FileExistsError:
        return kept(path) or service, KEPT_SOURCE
    finally:
        temporary.unlink(missing_ok=True)
    files.fsync_dir(path.parent)
    return service, MINTED_SOURCE


def mint_service_ibi(config: settings.Config) -> str:
    """A repository name from archiveaddress when it is a domain name of two words or more,
    else an IBIp from archiveip, or the address's IP, or loopback; the port is the address's."""
    host, port = host_port(config.archiveaddress, mintmod.REP_DEFAULT_PORT)
    host = host or "localhost"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        try:
            return mintmod.mint(host, port, form="rep", state_dir=config.state_dir).rep
        except ibimod.IbiError:
            pass  # "localhost", or a name Table 6.1 refuses: the IP then
        ip = config.archiveip or "127.0.0.1"
    else:
        ip = config.archiveip or host
    return mintmod.mint(ip=ip, port=port, form="ibip", state_dir=config.state_dir).ibip


def complete(config: settings.Config, problems: list[str]) -> settings.Config:
    """`config` with archiveaddress and archiveserviceibi filled in when not given; a line in
    `problems` for what cannot be. Nothing is minted while `problems` holds any: a command that
    stops anyway (a missing collection, a mistyped state_dir) leaves no identity behind."""
    config = with_address(config)
    return config if problems else with_service_ibi(config, problems)


def describe(config: settings.Config) -> list[str]:
    """One start-up line for each identity setting filled in here."""
    lines = []
    if config.sources.get("archiveaddress") == BIND_SOURCE:
        lines.append(
            f"archiveaddress is not set: using the bind address {config.archiveaddress} "
            f"(URLs handed out start http://{config.archiveaddress}/); set archiveaddress to "
            "the host[:port] where users and the resolver reach this Archive"
        )
    source = config.sources.get("archiveserviceibi", "")
    if source.startswith(REMINTED_SOURCE):
        _, trial, path = source.split(" ", 2)
        lines.append(
            f"archiveserviceibi is not set: minted {config.archiveserviceibi} from archiveaddress "
            f"{config.archiveaddress}, in place of {trial}, minted on a trial run and never "
            f"announced; kept in {path} for every later start"
        )
    elif source.startswith(MINTED_SOURCE):
        lines.append(
            f"archiveserviceibi is not set: minted {config.archiveserviceibi} for this "
            f"Archive's service, kept in {source.split(' ', 1)[1]} for every later start"
        )
    elif source.startswith(KEPT_SOURCE):
        lines.append(
            f"archiveserviceibi is not set: using {config.archiveserviceibi}, minted at the "
            f"first start and kept in {source.split(' ', 1)[1]}"
        )
    return lines


def trial_warning(config: settings.Config) -> str | None:
    """The warning for a service IBI minted on a trial run and kept because a resolver has
    been told of it since, or None."""
    source = config.sources.get("archiveserviceibi", "")
    if not source.startswith(TRIAL_KEPT_SOURCE + " "):
        return None
    _, trial, path = source.split(" ", 2)
    return (
        f"archiveserviceibi {config.archiveserviceibi} (kept in {path}) was minted from the "
        f"trial address {trial}, not from archiveaddress {config.archiveaddress}; it has been "
        "announced to a resolver, so it stays this Archive's identity. To take another, set "
        "archiveserviceibi (and tell the resolver's operator)"
    )
