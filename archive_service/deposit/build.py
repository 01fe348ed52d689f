"""Building an item's files: the files deposited, checked and copied into its new `doc/`, the
new sidecar (checked to read back valid), the temporary directory they are built in."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from ..collection import items
from ..collection import sidecar as sidecarmod
from ..collection.sidecar import SIDECAR
from ..common import files as filesmod
from ..common.yamlsafe import SafeLoader, dump_sidecar
from .holdings import TEMP_PREFIX, DepositError, iso


def checked_sources(
    files: Sequence[str | os.PathLike[str]], location: str | None = None
) -> list[tuple[str, Path]]:
    if not files and location is None:
        raise DepositError("give at least one file to deposit, or the location of its content")
    sources: dict[str, Path] = {}
    for name in files:
        path = Path(name)
        if path.is_symlink():
            # A depositor's upload (rsync -a, sftp keep links) could carry a file from
            # elsewhere on this host (the state dir's urlkey.secret) into a public item.
            raise DepositError(
                f"{path}: a symbolic link (to {filesmod.link_target(path)}); give the file itself"
            )
        if not path.is_file():
            raise DepositError(f"{path}: not a regular file")
        if not os.access(path, os.R_OK):
            raise DepositError(f"{path}: cannot be read")
        if items.UNSERVED.search(path.name):
            # It would be in doc/, never served nor listed: an item whose one file gets no URL.
            raise DepositError(
                f"{path}: its name holds a control character or a backslash, which is never "
                "served; rename it"
            )
        if path.name in sources:
            raise DepositError(
                f"two files are named {path.name!r} ({sources[path.name]} and "
                f"{path}); doc/ holds one file per name"
            )
        sources[path.name] = path
    return list(sources.items())


def new_sidecar(data: Mapping[str, Any], when: datetime) -> str:
    text = f"# Deposited with archive-service deposit at {iso(when)}.\n" + dump_sidecar(data)
    # One the index would refuse (too large) must not be written: nothing could serve it.
    problem = sidecarmod.bounds_problem(text.encode("utf-8"))
    if problem is not None:
        raise DepositError(f"the new {SIDECAR} would be {problem}; nothing changed")
    sidecarmod.parse(
        yaml.load(text, Loader=SafeLoader), SIDECAR
    )  # what we write must read back valid
    return text


def copy_file(source: Path, destination: Path, no_links: bool = False) -> None:
    # Checked earlier (checked_sources, an import's checks): no link swapped in since is
    # followed. A depositor who keeps renaming a link and the file over the upload's name
    # got urlkey.secret into 9 of 30 deposits' doc/ (issue 30, tenth adversarial pass).
    # A deposit's FILE is a path the admin typed: only its last part may not be a link.
    try:
        fd = filesmod.open_no_links(source, last_only=not no_links)
    except OSError as exc:
        raise DepositError(
            f"{source}: {exc.strerror} now (changed since it was checked?); not copied"
        ) from None
    # Opened "xb": the new file's mode follows the umask, not the upload's mode.
    with open(fd, "rb") as stream, open(destination, "xb") as written:
        shutil.copyfileobj(stream, written, 1 << 20)
    with open(destination, "rb") as written:
        os.fsync(written.fileno())


def make_temp_dir(collection: Path) -> Path:
    while True:
        path = collection / f"{TEMP_PREFIX}{secrets.token_hex(6)}"
        try:
            path.mkdir(mode=0o777)  # mode follows the umask (mkdtemp would give 0700)
            return path
        except FileExistsError:
            continue


def fill_doc(doc: Path, sources: Sequence[tuple[str, Path]], no_links: bool = False) -> None:
    doc.mkdir(mode=0o777)
    for name, path in sources:
        copy_file(path, doc / name, no_links)
    filesmod.fsync_dir(doc)
