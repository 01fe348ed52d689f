"""Shared fixtures, and the rule for what tests share.

- Fixtures (builders of collections, settings, apps, started servers) live here.
- Code a test imports lives in support modules, never in test modules: support.py (the sample's
  names, the WebTest `Client`, the seed's reference answers), serve_process.py (`free_port`,
  the one launcher of our own processes, `Process`, and `Serve` on top of it), fronts.py
  (apache2 / nginx in front of `serve`), resolver_support.py, resolver_double.py (the outside
  resolver), isolation.py (forked, unprivileged or size-limited children).
- A test module imports nothing from another test module, nor from this file.
- The environment is changed through `monkeypatch`, so that it is restored.
- Markers: `process` for tests that start real processes or servers of ours (or apache2 /
  nginx), `slow` for tests that take seconds even alone. `pytest -m "not process"` is the quick
  run; the default run (and CI) runs everything.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from archive_service.web import create_app
from fronts import public_copy, started_fronts
from oai_provider import Provider, started_provider
from support import (  # noqa: F401 (old imports)
    ADDRESS,
    PHONE,
    PLATFORM,
    ROOT,
    SAMPLE,
    SERVICE,
    Client,
)

MARKERS = {
    "process": "starts real processes or servers of ours, or a front web server (deselect "
    "with -m 'not process' for a quick run)",
    "slow": "takes seconds even alone",
}


def pytest_configure(config) -> None:
    for name, meaning in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")


@pytest.fixture(autouse=True, scope="session")
def private_data_home(tmp_path_factory):
    """Settings without a state_dir default to the user's data directory: keep tests (and the
    serve processes they start, which inherit the environment) out of the real one."""
    home = tmp_path_factory.mktemp("data-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_DATA_HOME", str(home))
        yield home


@pytest.fixture
def collection(tmp_path: Path) -> Path:
    """A copy of sample_collection the test may change."""
    target = tmp_path / "collection"
    shutil.copytree(SAMPLE, target, symlinks=True)
    return target


@pytest.fixture
def settings(collection: Path, tmp_path: Path) -> dict:
    return {
        "collection": str(collection),
        "archiveaddress": ADDRESS,
        "archiveserviceibi": SERVICE,
        "platformsoftware": PLATFORM,
        "resolver": "none",
        "state_dir": str(tmp_path / "state"),
    }


@pytest.fixture(params=["", "/archive"], ids=["root", "mounted"])
def client(request, settings) -> Client:
    return Client(create_app(settings), request.param)


@pytest.fixture
def public() -> Path:
    """A copy of the sample collection that apache2's and nginx's unprivileged user can read."""
    with public_copy() as top:
        yield top


@pytest.fixture
def fronts() -> list:
    """Append started front servers and Serves here; each is stopped after the test."""
    with started_fronts() as started:
        yield started


def _mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True)


@pytest.fixture
def read_only(tmp_path: Path):
    """make_read_only(directory): bind-mount it read-only onto itself until the test ends."""
    mounted: list[Path] = []

    def make_read_only(directory: Path) -> None:
        done = _mount("--bind", str(directory), str(directory))
        if done.returncode != 0:
            pytest.skip(f"cannot bind-mount here: {done.stderr.strip()}")
        mounted.append(directory)
        done = _mount("-o", "remount,bind,ro", str(directory))
        assert done.returncode == 0, done.stderr

    yield make_read_only
    for directory in reversed(mounted):
        subprocess.run(["umount", "-l", str(directory)], check=False)


@pytest.fixture
def small_disk(tmp_path: Path):
    """small_disk(size, name): a tmpfs of `size` ("2m") mounted at tmp_path/name until the
    test ends, for a disk that fills up; the test is skipped where none can be mounted."""
    mounted: list[Path] = []

    def make_small_disk(size: str, name: str = "small") -> Path:
        disk = tmp_path / name
        disk.mkdir()
        done = _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk))
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(disk)
        return disk

    yield make_small_disk
    for disk in reversed(mounted):
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.fixture
def phone_browser():
    """Debian's chromium, headless, through its chromedriver (selenium), showing pages at
    PHONE's size as a phone does (mobile viewport: `width=device-width` means 360 px)."""
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not chromedriver:
        pytest.skip("chromium and chromium-driver (Debian packages) are not installed")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    # --no-sandbox: the tests run as root, where chromium's sandbox refuses to start.
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"):
        options.add_argument(argument)
    options.add_argument(f"--window-size={PHONE[0]},{PHONE[1]}")
    driver = webdriver.Chrome(service=Service(chromedriver), options=options)
    try:
        width, height = PHONE
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": True},
        )
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def served_copy(collection: Path, tmp_path: Path):
    """A real `serve` of this test's copy of the sample collection (the browser tests')."""
    from serve_process import serve_collection

    serve = serve_collection(tmp_path, collection, tmp_path / "state")
    try:
        serve.wait_answering(timeout=60)
        yield serve
        assert serve.stop() == 0
    finally:
        serve.kill()


@pytest.fixture(scope="session")
def postgres_server():
    """One throwaway PostgreSQL server for the whole run (tests/postgres_server.py)."""
    import postgres_server as pg

    reason = pg.unavailable()
    if reason:
        pytest.skip(reason)
    server = pg.PostgresServer().start()
    try:
        yield server
    finally:
        from archive_service.common import postgres

        postgres.close_all()
        server.stop()


@pytest.fixture
def database_url(postgres_server) -> str:
    """The URL of a fresh, empty database for this test (the `database` setting)."""
    return postgres_server.new_database()


@pytest.fixture
def oai_provider():
    """An OAI-PMH data provider on loopback (tests/oai_provider.py), holding no record yet:
    the test adds them, and may change its page size, granularity and sets."""
    with started_provider(Provider()) as provider:
        yield provider


@pytest.fixture
def import_settings(tmp_path: Path, settings) -> dict:
    """`settings` with an empty collection of its own, for what an import brings in."""
    collection = tmp_path / "imported"
    collection.mkdir()
    return {**settings, "collection": str(collection)}
