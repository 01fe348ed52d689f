"""The urlkey secret's store: where the one secret every worker (and, with `database`, every
node) signs and checks urlkeys with is kept (protocol/urlkeys.py makes and checks the keys,
never reads or writes the secret). Two stores, one module each, with one function that loads
(making it on first use) the secret: `file.load_secret` (`<state_dir>/urlkey.secret`, the
default) and `postgres.load_shared_secret` (the `urlkey_secret` row); `of_archive` picks one
and turns an unusable store into keys of this process only, logged, never fatal."""

from __future__ import annotations

import logging
import os

from ...protocol.urlkeys import UrlKeys
from .file import SECRET_FILE, load_secret
from .postgres import load_shared_secret

__all__ = ["SECRET_FILE", "from_state_dir", "load_secret", "load_shared_secret", "of_archive"]

# The name the log lines have always carried (this was protocol/urlkeys.py's).
log = logging.getLogger("archive_service.protocol.urlkeys")


def of_archive(state_dir: str | os.PathLike, database: str = "") -> UrlKeys:
    """The Archive's keys: with `database` (the setting) the secret every node shares,
    kept in that database; else the one in `state_dir`. An unusable store is logged,
    never fatal."""
    if not database:
        return from_state_dir(state_dir)
    from ...common import postgres

    try:
        return UrlKeys(load_shared_secret(database))
    except postgres.DatabaseError as exc:
        log.error(
            "cannot read the shared URL-key secret (%s): using a secret of this process "
            "only; acknowledgments of this node's answers reaching another node are not "
            "counted until this node restarts with the database reachable",
            exc,
        )
        keys = UrlKeys.ephemeral()
        keys.problem = (
            f"the shared URL-key secret cannot be read ({exc}): keys this node issues "
            "verify on no other node; restart it once the database answers"
        )
        return keys


def from_state_dir(state_dir: str | os.PathLike) -> UrlKeys:
    """The Archive's keys; an unusable state directory is logged, never fatal."""
    try:
        return UrlKeys(load_secret(state_dir))
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        log.error(
            "cannot keep the URL-key secret in %s (%s): using a secret of this "
            "process only; acknowledgments verify until the next restart",
            state_dir,
            why,
        )
        keys = UrlKeys.ephemeral()
        keys.problem = (
            f"the URL-key secret cannot be kept in {state_dir} ({why}): keys "
            "issued before a restart will not verify after it"
        )
        return keys
