"""Injected faults: unreadable or broken sidecars and files, files vanishing or changing while
served, a read-only or full state directory. The service keeps answering, correctly, and says
what went wrong in its log. (A worker killed mid-request: test_serve_faults.py.)"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from archive_service.protocol import pairs
from archive_service.protocol.answers import Archive
from archive_service.stores import stats
from archive_service.testing import wait_until
from archive_service.web import create_app
from isolation import chown_tree, in_child, shared_tmp
from support import ADDRESS, SAMPLE, SERVICE, Client

RELATORIO = "8JMKD3MGP7W/3EPGUE5"
RELATORIO_DIR = "sid.inpe.br/mtc-m19/2013/09.04.12.27.57"
OAIS = "8JMKD3MGP8W/35MMLL8"
OAIS_DIR = "sid.inpe.br/mtc-m18@80/2009/07.21.14.43"
NOTICE = "notice {acknowledgment received}"


@pytest.fixture
def world():
    """A collection and a state dir the unprivileged child can use."""
    with shared_tmp() as root:
        shutil.copytree(SAMPLE, root / "collection", symlinks=True)
        chown_tree(root / "collection")
        yield root


def settings_for(root: Path) -> dict:
    return {
        "collection": str(root / "collection"),
        "archiveaddress": ADDRESS,
        "archiveserviceibi": SERVICE,
        "resolver": "none",
        "state_dir": str(root / "state"),
    }


def answer(client: Client, ibi: str) -> dict[str, str]:
    response = client.url_request(ibi)
    assert response.status_int == 200
    return dict(pairs.parse(response.text))


def ack(client: Client, got: dict[str, str]) -> str:
    return client.service(
        servicesubject="acknowledgment",
        **{
            "clientinformation.ipaddress": "150.163.2.175",
            "contenttype": got["contenttype"],
            "state": got["state"],
            "url": got["url"],
            "url.persistent": "http://urlib.net/x",
            "urlkey": got["urlkey"],
        },
    ).text


# --------------------------------------------------------------------- the collection


@pytest.mark.process
def test_an_unreadable_sidecar_skips_its_item_only(world):
    (world / "collection" / RELATORIO_DIR / "item.yaml").chmod(0o000)

    def child():
        client = Client(create_app(settings_for(world)), "")
        return client.url_request(RELATORIO).text, answer(client, OAIS)["url"]

    (unreadable, other), log = in_child(child, unprivileged=True)
    assert unreadable == "", "an item whose sidecar cannot be read is not answered for"
    assert other.endswith("CCSDS%20650.0-B-1.pdf")
    assert any(f"{RELATORIO_DIR}/item.yaml" in line and "Permission denied" in line for line in log)


@pytest.mark.parametrize(
    "text",
    [
        "state: [unclosed\n",
        "state: Lost\n",
        "- a list\n",
        "\x00\xff garbage",
        "target: ../../../item.yaml\n",
    ],
)
def test_a_broken_sidecar_skips_its_item_only(collection, settings, text, caplog):
    path = collection / RELATORIO_DIR / "item.yaml"
    path.write_bytes(text.encode("latin-1"))
    client = Client(create_app(settings), "")
    assert client.url_request(RELATORIO).text == ""
    assert answer(client, OAIS)["url"]
    assert f"{RELATORIO_DIR}/item.yaml" in caplog.text


@pytest.mark.process
def test_an_unreadable_doc_directory_gives_no_url_and_a_404(world):
    doc = world / "collection" / OAIS_DIR / "doc"

    def child():
        app = create_app(settings_for(world))
        app.extensions["archive"].CHECK_EVERY = 0  # what the re-check finds, not when
        client = Client(app, "")
        url = answer(client, OAIS)["url"]
        doc.chmod(0o000)  # after the index was built
        try:
            return (
                "url" in answer(client, OAIS),
                client.get_url(url, expect_errors=True).status_int,
                client.get(f"/{SERVICE}/filelist/{OAIS_DIR}").status_int,
            )
        finally:
            doc.chmod(0o755)

    (has_url, download, filelist), _ = in_child(child, unprivileged=True)
    assert (has_url, download, filelist) == (False, 404, 200)


def test_files_vanished_since_the_index_lose_their_url_within_a_second_and_404(
    collection, settings
):
    client = Client(create_app(settings), "")
    before = answer(client, OAIS)
    (collection / OAIS_DIR / "doc" / "CCSDS 650.0-B-1.pdf").unlink()
    vanished = time.monotonic()
    client.get_url(before["url"], status=404)
    # The answer kept for this IBI re-checks its files once CHECK_EVERY has passed.
    assert wait_until(lambda: "url" not in answer(client, OAIS), timeout=5, interval=0.05)
    assert time.monotonic() - vanished < Archive.CHECK_EVERY + 1
    after = answer(client, OAIS)
    assert "urlkey" not in after and after["ibi"] == before["ibi"]
    shutil.rmtree(collection / RELATORIO_DIR)
    gone = answer(client, RELATORIO)
    assert "url" not in gone
    client.get(f"/{SERVICE}/filelist/{RELATORIO_DIR}", status=200)


class OpenHook:
    """Act on a file the moment the service opens it (a Python audit hook: the one seam
    between 'the file is checked' and 'the file is opened' that needs no mock)."""

    installed = False
    armed: tuple[bytes, object] | None = None

    @classmethod
    def arm(cls, path: Path, action) -> None:
        if not cls.installed:
            sys.addaudithook(cls._hook)
            cls.installed = True
        cls.armed = (os.fsencode(path), action)

    @classmethod
    def _hook(cls, event: str, args) -> None:
        if event != "open" or cls.armed is None or not isinstance(args[0], (str, bytes)):
            return
        path, action = cls.armed
        if os.fsencode(args[0]) == path:
            cls.armed = None
            action()


@pytest.fixture
def open_hook():
    yield OpenHook
    OpenHook.armed = None


def test_a_file_removed_as_it_is_opened_is_a_404(collection, settings, open_hook):
    client = Client(create_app(settings), "")
    url = answer(client, OAIS)["url"]
    path = collection / OAIS_DIR / "doc" / "CCSDS 650.0-B-1.pdf"
    open_hook.arm(path, path.unlink)
    client.get_url(url, status=404)
    assert open_hook.armed is None, "the hook must have fired"


def test_a_file_replaced_as_it_is_opened_is_served_whole_from_one_version(
    collection, settings, open_hook
):
    client = Client(create_app(settings), "")
    url = answer(client, OAIS)["url"]
    path = collection / OAIS_DIR / "doc" / "CCSDS 650.0-B-1.pdf"
    new = b"%PDF-1.4 a new, longer edition\n" * 100
    staged = path.with_name(".staged")
    staged.write_bytes(new)
    open_hook.arm(path, lambda: os.replace(staged, path))
    response = client.get_url(url)
    assert response.body == new and response.content_length == len(new)


# ---------------------------------------------------------------------- the state dir


@pytest.mark.process
def test_a_state_dir_that_cannot_be_created_leaves_the_service_answering(world):
    (world / "state").write_text("a file where the state directory should be")

    def child():
        client = Client(create_app(settings_for(world)), "")
        got = answer(client, RELATORIO)
        return ack(client, got), answer(client, OAIS)["url"]

    (notice, url), log = in_child(child, unprivileged=True)
    assert notice == NOTICE and url
    assert any("ERROR" in line and "URL-key secret" in line for line in log)
    assert any(
        "ERROR" in line and "cannot record acknowledgment statistics" in line for line in log
    )


@pytest.mark.process
def test_a_state_dir_turned_read_only_keeps_the_answers_and_logs_once(world):
    state = world / "state"

    def child():
        client = Client(create_app(settings_for(world)), "")
        first = ack(client, answer(client, RELATORIO))
        state.chmod(0o555)
        for name in os.listdir(state):
            (state / name).chmod(0o444)
        app = Client(create_app(settings_for(world)), "")  # a restart onto the read-only dir
        notices = [ack(app, answer(app, OAIS)) for _ in range(5)]
        return first, notices

    (first, notices), log = in_child(child, unprivileged=True)
    assert first == NOTICE and notices == [NOTICE] * 5
    errors = [line for line in log if "cannot record acknowledgment statistics" in line]
    assert len(errors) == 1, "a failing store is logged, not once per request"
    assert "readonly" in errors[0] or "read-only" in errors[0] or "unable to open" in errors[0]
    for name in os.listdir(state):
        (state / name).chmod(0o644)
    state.chmod(0o755)
    assert stats.Store(state).report()["total"] == 1


@pytest.mark.process
def test_a_full_state_dir_keeps_the_answers_and_recovers(world):
    """A file-size limit makes every write that grows a file fail (EFBIG), as a full disk
    would: the acknowledgment is still answered, and counting resumes once there is room."""
    settings = settings_for(world)
    client = Client(create_app(settings), "")
    assert ack(client, answer(client, RELATORIO)) == NOTICE  # the store exists
    pending = [answer(client, OAIS) for _ in range(50)]
    limit = max(f.stat().st_size for f in (world / "state").iterdir())

    def child():
        full = Client(create_app(settings), "")
        return [ack(full, got) for got in pending]

    notices, log = in_child(child, max_file_size=limit)
    assert notices == [NOTICE] * 50
    assert any(
        "ERROR" in line and "cannot record acknowledgment statistics" in line for line in log
    )
    counted_while_full = stats.Store(world / "state").report()["total"]
    assert counted_while_full < 51, "the limit must have bitten"
    fresh = Client(create_app(settings), "")
    assert ack(fresh, answer(fresh, OAIS)) == NOTICE
    assert stats.Store(world / "state").report()["total"] == counted_while_full + 1
