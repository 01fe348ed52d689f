"""An import while the Archive serves (issue 21): each item it mints is answered within a
second of the import's end, and the service keeps answering meanwhile (the import takes the
deposit lock per item, never a lock the service waits on)."""

from __future__ import annotations

import threading
import time
import urllib.parse

import pytest

from serve_process import run_command, serve_collection
from support import pairs_of

ROWS = 300


@pytest.mark.process
@pytest.mark.slow
def test_imported_items_are_answered_within_a_second_and_serving_never_stops(tmp_path):
    collection, state = tmp_path / "collection", tmp_path / "state"
    collection.mkdir()
    (collection / "README").write_text("an empty collection\n")
    manifest = tmp_path / "items.csv"
    manifest.write_text(
        "id,location,title\n"
        + "".join(f"r{n},https://repo.example.org/handle/1/{n},Item {n}\n" for n in range(ROWS))
    )
    serve = serve_collection(tmp_path, collection, state)
    try:
        serve.wait_answering()
        slowest = [0.0]
        stop = threading.Event()

        def keep_asking() -> None:
            while not stop.is_set():
                started = time.monotonic()
                assert serve.get(timeout=10) == "confirmation yes"
                slowest[0] = max(slowest[0], time.monotonic() - started)
                time.sleep(0.01)

        asker = threading.Thread(target=keep_asking, daemon=True)
        asker.start()
        done = run_command(
            ["import", "manifest", str(manifest), "--verbose", "--collection", str(collection)]
            + ["--state-dir", str(state), "--archiveaddress", "archive.example.org"]
        )
        finished = time.monotonic()
        assert done.returncode == 0, done.stderr
        minted = {
            line.split()[3]: line.split()[1]
            for line in done.stdout.splitlines()
            if line.startswith("minted ")
        }
        assert len(minted) == ROWS
        for source_id in ("r0", f"r{ROWS - 1}"):
            ibi = minted[source_id]
            query = urllib.parse.urlencode(
                {
                    "servicesubject": "urlRequest",
                    "clientinformation.ipaddress": "192.0.2.1",
                    "parsedibiurl.ibi": ibi,
                }
            )
            while True:
                got = pairs_of(serve.get(query))
                if "url" in got:
                    break
                assert time.monotonic() - finished < 1.0, f"{ibi} not answered within 1 s"
                time.sleep(0.02)
            n = source_id[1:]
            assert got["url"] == f"https://repo.example.org/handle/1/{n}"
        stop.set()
        asker.join(10)
        assert slowest[0] < 1.0, f"an answer took {slowest[0]:.2f} s during the import"
        print(f"slowest answer during the import of {ROWS} rows: {slowest[0] * 1000:.0f} ms")
    finally:
        serve.stop()
