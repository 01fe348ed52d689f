"""The urlkey secret in the state directory (the default): `<state_dir>/urlkey.secret`, mode
0600, created once atomically (written to a private temporary file, then hard-linked into
place, which fails if another process got there first; everyone then reads the one file
back)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from ...protocol.urlkeys import SECRET_BYTES

SECRET_FILE = "urlkey.secret"


def load_secret(state_dir: str | os.PathLike) -> bytes:
    """Read `<state_dir>/urlkey.secret`, creating it (0600, atomically) on first use."""
    directory = Path(state_dir)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / SECRET_FILE
    if not path.exists():
        _create_secret(path)
    with open(path, "rb") as stream:
        secret = stream.read(4096)
    if len(secret) < SECRET_BYTES:
        raise ValueError(
            f"{path} holds {len(secret)} bytes, not {SECRET_BYTES}: remove it to make a new one"
        )
    return secret


def _create_secret(path: Path) -> None:
    # A reader must never see a half-written secret, and two workers starting together must
    # end up with the same one: write a private file, then link it in; the loser of the race
    # gets EEXIST and reads the winner's.
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        owner = path.parent.stat()
        if os.geteuid() == 0 and owner.st_uid != 0:
            # root running `archive-service query` first must not lock the service out.
            os.fchown(fd, owner.st_uid, owner.st_gid)
        with os.fdopen(fd, "wb") as stream:
            stream.write(secrets.token_bytes(SECRET_BYTES))
            stream.flush()
            os.fsync(stream.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
    finally:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
