"""`archive-service serve --collection DIR` alone starts an Archive (issue 18): the address
defaults to the bind address, the service IBI is minted once and kept in state_dir, and
without a registration key nothing is announced (said once, recorded as not-joined)."""

from __future__ import annotations

import shutil
import urllib.request

import pytest

from archive_service.common import inclusion
from archive_service.protocol import ibi as ibimod
from serve_process import SAMPLE, Process, free_port, run_command

pytestmark = pytest.mark.process

KEY = "5550001234-9990004321"


@pytest.fixture
def alone(tmp_path):
    """serve with nothing but --collection (and a free port); XDG_DATA_HOME keeps its state."""
    collection = tmp_path / "col"
    shutil.copytree(SAMPLE, collection)
    (collection / "archive-service.yaml").unlink()
    data = tmp_path / "data"
    started: list[Process] = []

    def start(*more: str) -> tuple[Process, str]:
        port = free_port()
        log = tmp_path / f"serve-{port}.log"
        process = Process(
            ["serve", "--collection", str(collection), "--bind", f"127.0.0.1:{port}", *more],
            log,
            env={
                "XDG_DATA_HOME": str(data),
                "ARCHIVE_SERVICE_REGISTRATIONKEY": None,
            },
        ).start()
        started.append(process)
        return process, f"127.0.0.1:{port}"

    yield start, data / "archive-service"
    for process in started:
        process.kill()


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode("ascii")


def test_collection_alone_starts_answers_and_keeps_its_service_ibi(alone):
    start, state = alone
    process, address = start()
    service_file = state / "archiveserviceibi"
    process.wait_log("Booting worker")
    process.wait_log("not joined to any resolver")
    service = service_file.read_text().strip()
    assert ibimod.parse(service).kind == "ibip"  # 127.0.0.1: no domain name for a rep
    process.wait_answering(
        f"http://{address}/{service}?servicesubject=inclusionConfirmationRequest"
    )
    assert get(f"http://{address}/{service}?servicesubject=inclusionConfirmationRequest") == (
        "confirmation yes"
    )
    # The Archive's own item, and URLs built from the defaulted address.
    answer = get(
        f"http://{address}/{service}?servicesubject=urlRequest"
        f"&clientinformation.ipaddress=127.0.0.1&parsedibiurl.ibi={service}"
    )
    assert f"url http://{address}/{service}/about" in answer
    log = process.text()
    assert f"archiveaddress is not set: using the bind address {address}" in log
    assert f"archiveserviceibi is not set: minted {service}" in log
    assert "registrationkey_file" in log and "archiveaddress" in log
    assert log.count("not joined to any resolver") == 1
    assert inclusion.read(state).state == "not-joined"
    assert process.stop() == 0

    again, address = start()  # a restart (another port, even) keeps the IBI
    again.wait_answering(f"http://{address}/{service}?servicesubject=inclusionConfirmationRequest")
    assert service_file.read_text().strip() == service
    assert f"archiveserviceibi is not set: using {service}" in again.text()
    assert again.stop() == 0


def test_a_domain_name_gives_a_repository_name(alone, tmp_path):
    start, state = alone
    process, address = start("--archiveaddress", "archive.example.org")
    process.wait_log("not joined to any resolver")
    service = (state / "archiveserviceibi").read_text().strip()
    assert ibimod.parse(service).kind == "rep" and service.startswith("example.org/archive/")
    process.stop()


def refused(tmp_path, *more: str) -> list[str]:
    """serve with a key and a resolver elsewhere, which stops: the lines of its stderr."""
    done = run_command(
        [
            "serve",
            "--collection",
            str(SAMPLE),
            "--state-dir",
            str(tmp_path / "state"),
            "--bind",
            f"127.0.0.1:{free_port()}",
            "--resolver",
            "https://resolver.example.org/J8LNKB5R7W/3FUQHC5",
            *more,
        ],
        env={"ARCHIVE_SERVICE_REGISTRATIONKEY": KEY},
    )
    assert done.returncode == 2 and KEY not in done.stderr, done.stderr
    return done.stderr.strip().splitlines()


@pytest.mark.parametrize(
    "more, complaint",
    [
        ((), "archiveaddress is not set"),  # the bind address is for this machine only
        (("--archiveaddress", "127.0.0.1:8080"), "archiveaddress 127.0.0.1:8080 is a loopback"),
    ],
)
def test_an_address_the_resolver_cannot_reach_is_never_announced(tmp_path, more, complaint):
    lines = refused(
        tmp_path, "--archiveip", "192.0.2.7", "--archiveadmemailaddress", "admin@example.org", *more
    )
    assert len(lines) == 1 and complaint in lines[0] and "archiveaddress" in lines[0], lines


def test_missing_announcing_settings_are_listed_together(tmp_path):
    lines = refused(tmp_path, "--archiveaddress", "archive.example.org")
    assert "2 settings" in lines[0], lines
    assert [line for line in lines if "archiveip is missing" in line]
    assert [line for line in lines if "archiveadmemailaddress is missing" in line]


def test_a_trial_identity_is_minted_again_from_the_real_address(alone):
    """A trial run (the bind address, no resolver told) fixes no identity: once the admin gives
    archiveaddress, the service IBI is minted again from it, and said (issue 34, point 5)."""
    start, state = alone
    process, _ = start()
    process.wait_log("not joined to any resolver")
    trial = (state / "archiveserviceibi").read_text().strip()
    assert ibimod.parse(trial).kind == "ibip"
    assert process.stop() == 0

    real, _ = start("--archiveaddress", "archive.example.org")
    real.wait_log("not joined to any resolver")
    service = (state / "archiveserviceibi").read_text().strip()
    assert service.startswith("example.org/archive/"), service
    assert f"minted {service} from archiveaddress archive.example.org, in place of {trial}" in (
        real.text()
    )
    assert real.stop() == 0
    again, _ = start("--archiveaddress", "archive.example.org")  # and kept from then on
    again.wait_log("not joined to any resolver")
    assert (state / "archiveserviceibi").read_text().strip() == service
    assert again.stop() == 0


def test_an_announced_trial_identity_is_kept_with_a_warning(alone):
    start, state = alone
    process, address = start()
    process.wait_log("not joined to any resolver")
    trial = (state / "archiveserviceibi").read_text().strip()
    assert process.stop() == 0
    inclusion.record(state, "included", "http://127.0.0.1:9/J8LNKB5R7W/3FUQHC5")  # told since

    real, _ = start("--archiveaddress", "archive.example.org")
    real.wait_log("not joined to any resolver")
    assert (state / "archiveserviceibi").read_text().strip() == trial
    warning = [line for line in real.text().splitlines() if "WARNING" in line and trial in line]
    assert warning and "set archiveserviceibi" in warning[0] and address in warning[0], warning
    assert real.stop() == 0
    assert inclusion.read(state).state == "not-joined"  # what happened last: no key this time
    again, _ = start("--archiveaddress", "archive.example.org")
    again.wait_log("not joined to any resolver")
    assert (state / "archiveserviceibi").read_text().strip() == trial  # still, for good
    assert "set archiveserviceibi" in again.text()
    assert again.stop() == 0
