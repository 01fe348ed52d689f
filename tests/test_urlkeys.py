"""URL keys: Table 5.1 shape, bound to the answer's URLs, checkable by any process, expiring."""

from __future__ import annotations

import logging
import multiprocessing
import os
import re
import stat
from pathlib import Path

import pytest

from archive_service.protocol import urlkeys
from archive_service.protocol.urlkeys import UrlKeys
from archive_service.stores import urlkeys as secret_store

TABLE_5_1 = re.compile(r"[0-9]{10,}(?:-[0-9]{10,})?")
URL = "http://a.example/col/sid.inpe.br/mtc-m19/2013/09.04.12.27.57/doc/Relat%f3rio%20Final.pdf"


class Clock:
    def __init__(self, now: float = 1_700_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_keys_have_the_table_5_1_shape_and_are_new_every_time():
    keys = UrlKeys.ephemeral()
    issued = {keys.issue([URL]) for _ in range(200)}
    assert len(issued) == 200
    assert all(TABLE_5_1.fullmatch(k) for k in issued)
    assert all(len(k.split("-")[1]) >= 20 for k in issued)


def test_a_key_verifies_the_url_it_was_issued_for_and_no_other():
    keys = UrlKeys.ephemeral()
    key = keys.issue([URL])
    assert keys.verify(key, URL).ok
    assert keys.verify(key, URL.replace("Final", "Draft")).reason == "forged"
    other = keys.issue([URL])
    forged = key.split("-")[0] + "-" + other.split("-")[1]  # a tag moved to another key
    assert keys.verify(forged, URL).reason == "forged"


def test_one_key_covers_every_url_of_its_answer():
    keys = UrlKeys.ephemeral()
    urls = [f"http://a.example/col/x/doc/{lang}.pdf" for lang in ("en", "pt", "fr")]
    key = keys.issue(urls)
    assert all(keys.verify(key, u).ok for u in urls)
    assert len(key.split("-")[1]) == (3 + 1) * urlkeys.TAG_DIGITS  # a tag each, and the seal
    assert keys.verify(key, "http://a.example/col/x/doc/de.pdf").reason == "forged"


def test_an_answer_without_url_gets_a_key_that_verifies_nothing():
    keys = UrlKeys.ephemeral()
    key = keys.issue([])
    assert TABLE_5_1.fullmatch(key)
    assert not keys.verify(key, "http://a.example/").ok


@pytest.mark.parametrize(
    "acknowledged",
    [
        URL,  # escaped by a careful resolver, decoded once by the query parser
        "http://a.example/col/sid.inpe.br/mtc-m19/2013/09.04.12.27.57/doc/Relat\udcf3rio Final.pdf",
        URL.replace("%f3", "%F3"),
        URL.replace("%20", "+"),
    ],
)
def test_the_seeds_unescaped_url_in_the_query_verifies_too(acknowledged):
    """Example 6.9 puts `url=…/Relat%f3rio%20Final.pdf` raw into the query: decoded, it is
    `Relat\\xf3rio Final.pdf` as bytes; every spelling names the same bytes."""
    keys = UrlKeys.ephemeral()
    assert keys.verify(keys.issue([URL]), acknowledged).ok


def test_keys_expire_and_cannot_come_from_the_future():
    clock = Clock()
    keys = UrlKeys(b"s" * 32, clock=clock)
    key = keys.issue([URL])
    clock.now += urlkeys.LIFETIME - 1
    assert keys.verify(key, URL).ok
    clock.now += 2
    assert keys.verify(key, URL).reason == "expired"
    clock.now -= urlkeys.LIFETIME + urlkeys.CLOCK_SKEW + 10
    assert keys.verify(key, URL).reason == "future"


@pytest.mark.parametrize(
    "key",
    [
        "",
        "1427244889-5349022633744855",
        "12345",
        "1427244889123456-",
        "x" * 40,
        "142724488912345678-1234567890123456789",  # a tag of 19 digits
        "142724488912345678-123456789012345678901",  # 21: not a whole number of tags
    ],
)
def test_keys_of_another_shape_are_malformed(key):
    assert UrlKeys.ephemeral().verify(key, URL).reason == "malformed"


def test_the_secret_is_created_once_private_and_shared_by_restarts(tmp_path: Path):
    state = tmp_path / "state"
    first = secret_store.from_state_dir(state)
    path = state / secret_store.SECRET_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(path.read_bytes()) == urlkeys.SECRET_BYTES
    key = first.issue([URL])
    assert secret_store.from_state_dir(state).verify(key, URL).ok, "a restart must check old keys"
    assert not UrlKeys.ephemeral().verify(key, URL).ok
    assert sorted(os.listdir(state)) == [secret_store.SECRET_FILE], "no temporary file left behind"


def _secret_of(state: str, barrier, results) -> None:
    barrier.wait()
    results.put(secret_store.load_secret(state))


@pytest.mark.process
def test_workers_starting_together_agree_on_one_secret(tmp_path: Path):
    context = multiprocessing.get_context("fork")
    for attempt in range(5):
        state = str(tmp_path / f"state{attempt}")
        barrier, results = context.Barrier(8), context.Queue()
        workers = [
            context.Process(target=_secret_of, args=(state, barrier, results)) for _ in range(8)
        ]
        for worker in workers:
            worker.start()
        secrets = [results.get(timeout=10) for _ in workers]
        for worker in workers:
            worker.join()
        assert len(set(secrets)) == 1 and len(secrets[0]) == urlkeys.SECRET_BYTES
        assert (Path(state) / secret_store.SECRET_FILE).read_bytes() == secrets[0]


def test_an_unusable_state_directory_is_logged_and_keys_still_work(tmp_path: Path, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with caplog.at_level(logging.ERROR, logger="archive_service.protocol.urlkeys"):
        keys = secret_store.from_state_dir(blocker / "state")
    assert "cannot keep the URL-key secret" in caplog.text
    assert keys.verify(keys.issue([URL]), URL).ok
    assert "a-file" in keys.problem and "\n" not in keys.problem, "for a health check to say"
    assert secret_store.from_state_dir(tmp_path / "state").problem is None


def test_a_truncated_secret_is_reported_not_used(tmp_path: Path, caplog):
    (tmp_path / secret_store.SECRET_FILE).write_bytes(b"short")
    with pytest.raises(ValueError, match="holds 5 bytes"):
        secret_store.load_secret(tmp_path)
    with caplog.at_level(logging.ERROR):
        secret_store.from_state_dir(tmp_path)
    assert "remove it" in caplog.text and "short" not in caplog.text


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can create a file for another user")
def test_root_creating_the_secret_gives_it_to_the_state_dirs_owner(tmp_path: Path):
    state = tmp_path / "state"
    state.mkdir()
    os.chown(state, 65534, 65534)
    secret_store.load_secret(state)
    secret = (state / secret_store.SECRET_FILE).stat()
    assert (secret.st_uid, secret.st_gid, stat.S_IMODE(secret.st_mode)) == (65534, 65534, 0o600)


@pytest.mark.process
def test_forked_workers_draw_different_nonces():
    keys = urlkeys.UrlKeys.ephemeral()
    keys.issue(["http://a/x"])  # the parent's pool of randomness is filled now
    nonces = []
    for _ in range(2):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # a worker: its first key after the fork
            os.write(write_end, keys.issue(["http://a/x"]).encode())
            os._exit(0)
        os.close(write_end)
        nonces.append(os.read(read_end, 200).decode()[10:18])
        os.close(read_end)
        os.waitpid(pid, 0)
    nonces.append(keys.issue(["http://a/x"])[10:18])
    assert len(set(nonces)) == 3, nonces
