#!/usr/bin/env python3
"""CPU per request of the resolver's client to an Archive (resolver/archives.py
`ArchiveClient.get`), next to the floor measured in the same run: the same request written
to and read from a kept socket by hand, with no parsing at all (issue 24).

A real `archive-service serve` Archive (A of tests/resolver_support) on loopback; 2,000
sequential urlRequests per client, kept connections, CPU time of this process.

    python3 bench/archive_client.py [--n 2000] [--rounds 3]

Also shown, for the choice of a parser: http.client on a kept connection, and h11 (there
already through the OAI-PMH harvester) when it is installed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from resolver_scale import SERVICE_A, start_bed  # noqa: E402

from archive_service.resolver.archives import ArchiveClient  # noqa: E402
from archive_service.resolver.resolve import ArchiveRef  # noqa: E402

PARAMS = {
    "servicesubject": "urlRequest",
    "clientinformation.ipaddress": "127.0.0.1",
    "parsedibiurl.ibi": "8JMKD3MGP8W/35MMLL8",
}


def cpu_per_request(ask, n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        ask()
    return (time.process_time() - start) / n


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        running: list = []
        try:
            _, _, address = start_bed(Path(tmp), running)
            host, port = address.rsplit(":", 1)
            path = (
                f"/{SERVICE_A}?servicesubject=urlRequest&clientinformation.ipaddress=127.0.0.1"
                "&parsedibiurl.ibi=8JMKD3MGP8W/35MMLL8"
            )
            raw = f"GET {path} HTTP/1.1\r\nHost: {address}\r\n\r\n".encode()
            client = ArchiveClient(5)
            ref = ArchiveRef(address, SERVICE_A)

            # Each makes its connection anew for each run: the Archive closes one idle for
            # its keep-alive time while the others run.
            def by_hand():
                bare = socket.create_connection((host, int(port)))

                def ask() -> None:
                    bare.sendall(raw)
                    data = b""
                    while b"\r\n\r\n" not in data:
                        data += bare.recv(65536)
                    head, _, body = data.partition(b"\r\n\r\n")
                    length = next(
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    )
                    while len(body) < length:
                        body += bare.recv(65536)

                return ask, bare.close

            def ours():
                return (lambda: client.get(ref, PARAMS)), client.close

            def stdlib():
                kept = http.client.HTTPConnection(host, int(port), timeout=5)

                def ask() -> None:
                    kept.request("GET", path)
                    kept.getresponse().read()

                return ask, kept.close

            candidates = {
                "floor (by hand, no parsing)": by_hand,
                "ArchiveClient.get": ours,
                "http.client": stdlib,
            }
            try:
                import h11

                def with_h11():
                    sock = socket.create_connection((host, int(port)))
                    conn = h11.Connection(h11.CLIENT)

                    def ask() -> None:
                        head = [("Host", address)]
                        request = h11.Request(method="GET", target=path, headers=head)
                        sock.sendall(conn.send(request) + conn.send(h11.EndOfMessage()))
                        while True:
                            event = conn.next_event()
                            if event is h11.NEED_DATA:
                                conn.receive_data(sock.recv(65536))
                            elif isinstance(event, h11.EndOfMessage):
                                break
                        conn.start_next_cycle()

                    return ask, sock.close

                candidates["h11"] = with_h11
            except ImportError:
                pass
            results: dict[str, list[float]] = {name: [] for name in candidates}
            for _ in range(args.rounds):  # in turn, so a drift hits them all
                for name, make in candidates.items():
                    ask, close = make()
                    cpu_per_request(ask, 50)
                    results[name].append(cpu_per_request(ask, args.n))
                    close()
            floor = min(results["floor (by hand, no parsing)"])
            summary = {}
            for name, samples in results.items():
                best = min(samples)
                summary[name] = {"cpu_us": round(best * 1e6, 1), "ratio": round(best / floor, 2)}
                print(f"{name:28s} {best * 1e6:7.1f} us of CPU a request ({best / floor:.2f}x)")
        finally:
            for process in reversed(running):
                process.stop()
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
