"""A worker forked from a process that read the index reads it through a connection of its own
(index/catalog.py tells its connections from a parent's by common/processes.py `own_pid`,
which asks the kernel only at a fork, not on every request)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from archive_service.common.processes import own_pid
from archive_service.index import catalog as catalogmod
from archive_service.index import store

ITEM = "iconet.com.br/banon/2009/09.09.22.01"


def _in_child(check) -> bytes:
    """What `check()` returns (bytes) in a forked child."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write_end, check())
        finally:
            os._exit(0)
    os.close(write_end)
    got = os.read(read_end, 200)
    os.close(read_end)
    os.waitpid(pid, 0)
    return got


@pytest.mark.process
def test_own_pid_is_the_forked_childs() -> None:
    assert own_pid() == os.getpid()
    got = _in_child(lambda: f"{own_pid()} {os.getpid()}".encode())
    mine, kernels = got.split()
    assert mine == kernels != str(os.getpid()).encode()


@pytest.mark.process
def test_a_forked_process_reads_through_a_connection_of_its_own(
    collection: Path, tmp_path: Path
) -> None:
    index = store.Store(collection, tmp_path / "state")
    store.Writer(index).refresh()
    catalog = catalogmod.StoreCatalog(index)
    catalog.begin()
    state = catalog.item_at(ITEM).state
    catalog.end()
    parents = catalog._reader(check=False).conn

    def child() -> bytes:
        catalog.begin()
        try:
            item = catalog.item_at(ITEM)
        finally:
            catalog.end()
        own = catalog._reader(check=False).conn is not parents
        return f"{own} {item.state}".encode()

    assert _in_child(child) == f"True {state}".encode()
    assert catalog.item_at(ITEM).state == state  # the parent's connection still reads
