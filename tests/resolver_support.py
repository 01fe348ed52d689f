"""Helpers for the resolver tests: Archive collections built from the sample, Archives as
in-process servers on loopback ports, and readers of what the Archives received. (Real
processes of ours start through serve_process.Process.)"""

from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import yaml
from werkzeug.serving import make_server

from archive_service.resolver.archives import encode_query
from archive_service.resolver.resolve import Answer, ArchiveRef
from serve_process import http_get

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_collection"
PLATFORM = "dpi.inpe.br/banon/1998/08.02.08.56"
SERVICE_A = "sid.inpe.br/mtc-m18@80/2008/03.17.15.17"  # the seed's Archive (Examples 8.1, 8.2)
SERVICE_B = "sid.inpe.br/mtc-m21/2012/06.05.15.34.39"  # the Archive of Examples 5.2-5.4
KEY_A, KEY_B = "1234567890", "9876543210-0123456789"
RESOLVER_IBI = "J8LNKB5R7W/3FUQHC5"

NEXT_EDITION = "sid.inpe.br/mtc-m18/2012/07.12.18.08"
NEXT_METADATA = "sid.inpe.br/mtc-m18/2012/07.12.18.08.49"
E4E = "sid.inpe.br/mtc-m18@80/2009/07.21.13.23"  # 8JMKD3MGP8W/35MME4E
LL8 = "sid.inpe.br/mtc-m18@80/2009/07.21.14.43"  # 8JMKD3MGP8W/35MMLL8
BANON = "iconet.com.br/banon/2009/09.09.22.01"  # LK47B6W/362SFKH
DOUBLE = "iconet.com.br/banon/2011/06.14.16.40"  # Original in both Archives
COPY_ONLY = "dpi.inpe.br/banon/2003/12.10.19.30"  # a Copy in A, no Original anywhere
DELETED = "iconet.com.br/banon/2010/01.20.11.05"


def set_sidecar(item: Path, **values) -> None:
    sidecar = item / "item.yaml"
    data = yaml.safe_load(sidecar.read_text(encoding="utf-8")) if sidecar.exists() else {}
    data.update(values)
    sidecar.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")


def build_collections(base: Path) -> tuple[Path, Path]:
    """Archive A: the sample's originals, without the 2012 next edition of 35MMLL8.
    Archive B: that next edition and its metadata (so `35MMLL8!` takes two rounds, as in
    Example 8.2), Copy items of two of A's items, and a second Original of one of A's items
    (a double claim)."""
    a, b = base / "A", base / "B"
    shutil.copytree(SAMPLE, a, symlinks=True)
    for name in ("archive-service.yaml", "README.md", ".gitattributes"):
        (a / name).unlink(missing_ok=True)
    for moved in (NEXT_EDITION, NEXT_METADATA):
        (b / moved).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(a / moved, b / moved)
    for copied in (E4E, BANON):
        shutil.copytree(a / copied, b / copied)
        set_sidecar(b / copied, state="Copy")
    shutil.copytree(a / DOUBLE, b / DOUBLE)
    return a, b


def service_call(base: str, **params) -> tuple[int, str]:
    status, _, body = http_get(f"{base}?{encode_query(params)}")
    return status, body.decode("ascii")


_REQUEST_LINE = re.compile(r'"GET (\S+) HTTP/1\.[01]" (\d{3}) ')


def received(log_text: str, subject: str | None = None) -> list[tuple[dict, int]]:
    """Service requests an Archive received, from its gunicorn access log: (query, status)."""
    found = []
    for path, status in _REQUEST_LINE.findall(log_text):
        query = dict(parse_qsl(urlsplit(path).query, keep_blank_values=True))
        if "servicesubject" in query and (subject is None or query["servicesubject"] == subject):
            found.append((query, int(status)))
    return found


# ------------------------------------------------------------- in-process real servers


def archive_app(collection: Path, port: int, service: str, state: Path):
    """The project's Archive app for `collection`, at 127.0.0.1:`port`, announcing nothing."""
    from archive_service.web import create_app

    return create_app(
        {
            "collection": str(collection),
            "archiveaddress": f"127.0.0.1:{port}",
            "archiveserviceibi": service,
            "platformsoftware": PLATFORM,
            "resolver": "none",
            "state_dir": str(state),
        }
    )


def included_archive_config(
    path: Path,
    *,
    collection: Path,
    address: str,
    service: str,
    key: str,
    resolver: str,
    state: Path,
    archiveip: str = "127.0.0.1",
) -> Path:
    """Write the config file of an Archive `serve` at `address` (one worker, on loopback) that
    announces itself to `resolver` with `key`, mode 0600 as its key requires; its path."""
    path.write_text(
        yaml.safe_dump(
            {
                "collection": str(collection),
                "archiveaddress": address,
                "archiveserviceibi": service,
                "platformsoftware": PLATFORM,
                "archiveip": archiveip,
                "archiveadmemailaddress": "admin@archive.example",
                "registrationkey": key,
                "bind": address,
                "workers": 1,
                "state_dir": str(state),
                "resolver": resolver,
            }
        )
    )
    path.chmod(0o600)
    return path


class ThreadedServer:
    """A WSGI app of this project on a real loopback socket, served from a thread."""

    def __init__(self, app, port: int):
        self.server = make_server("127.0.0.1", port, app, threaded=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class InProcessArchives:
    """Archive apps called directly through WSGI: the resolution loop over real answers."""

    def __init__(self, archives: list[tuple[ArchiveRef, object]]):
        self.archives = archives
        self.asked: list[tuple[ArchiveRef, dict]] = []

    def ask(self, question, ips: str = "127.0.0.1", filepath: str | None = None) -> list[Answer]:
        from archive_service.protocol import pairs

        answers = []
        params = question.params(ips, filepath)
        for ref, app in self.archives:
            self.asked.append((ref, params))
            response = app.test_client().get(
                "/" + ref.serviceibi, query_string=encode_query(params)
            )
            assert response.status_code == 200, response.get_data(as_text=True)
            answers.append(
                Answer.of(ref, pairs.parse(response.get_data(as_text=True)), len(answers))
            )
        return answers
