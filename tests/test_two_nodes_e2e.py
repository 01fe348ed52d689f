"""End to end, issue 19: two `serve` nodes of one Archive on one collection and one PostgreSQL
database, behind contrib/nodes' nginx (round robin), the reference resolver in front with the
Archive included at nginx's address. 2,000 persistent URLs are resolved through the resolver
(resolver -> urlRequest through nginx -> redirect, the acknowledgment through nginx again), so
a urlRequest and its acknowledgment often reach different nodes; `stats` on either node then
shows exactly the acknowledgments the resolver sent, and replays of acknowledgments sent to
the other node are refused. bench/two_nodes.py times resolutions on this same bed."""

from __future__ import annotations

import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlencode

import pytest

from archive_service.resolver.registry import Registry
from fronts import CONTRIB, NGINX, DebianNginx, rewrite, start_debian_nginx
from resolver_support import received
from serve_process import (
    ANNOUNCING,
    SERVICE,
    Process,
    Serve,
    children,
    free_port,
    http_get,
    run_command,
    wait_until,
)

pytestmark = [
    pytest.mark.process,
    pytest.mark.slow,
    pytest.mark.skipif(
        NGINX is None, reason="nginx is not installed (Debian: apt-get install nginx)"
    ),
]

KEY = "5550001234-9990004321"
RESOLVER_IBI = "J8LNKB5R7W/3FUQHC5"
PURL = "/8JMKD3MGP8W/35MME4E"  # sid.inpe.br/mtc-m18@80/2009/07.21.13.23, in the sample
TARGET = "/col/sid.inpe.br/mtc-m18@80/2009/07.21.13.23/doc/CCSDS%20643.0-B-1.pdf"
RESOLUTIONS = 2000
NOTICE = b"notice {acknowledgment received}"
NODES_SITE = CONTRIB / "nodes" / "nginx-two-nodes.conf"


def user_ip(number: int) -> str:
    """A user address of its own for each resolution: it is the first of
    clientinformation.ipaddress in both the urlRequest and the acknowledgment, which pairs
    them in the nodes' access logs."""
    return f"10.{number >> 16 & 255}.{number >> 8 & 255}.{number & 255}"


class TwoNodes:
    """The bed: `resolver serve` (SERVICE registered), `serve` nodes a and b sharing `database`
    and announcing nginx's address, nginx balancing them with contrib/nodes' site. Everything
    started goes into `fronts` (stopped by its owner)."""

    def __init__(self, base: Path, public: Path, fronts: list, database: str):
        self.base, self.fronts = base, fronts
        self.state = base / "resolver-state"
        done = run_command(
            ["resolver", "register", "--state-dir", str(self.state)]
            + ["--serviceibi", SERVICE, "--key", KEY]
        )
        assert done.returncode == 0, done.stderr
        port = free_port()
        self.resolver_url = f"http://127.0.0.1:{port}"
        self.resolver = Process(
            ["resolver", "serve", "--state-dir", str(self.state)]
            + ["--bind", f"127.0.0.1:{port}", "--timeout", "5"],
            base / "resolver.log",
        ).start()
        fronts.append(self.resolver)
        self.resolver.wait_answering(self.resolver_url + "/")
        self.port = free_port()
        self.front = f"127.0.0.1:{self.port}"
        self.nodes: list[Serve] = []
        for name in ("a", "b"):
            node = Serve(
                base,
                "--state-dir",
                str(base / f"state-{name}"),
                "--database",
                database,
                "--resolver",
                f"{self.resolver_url}/{RESOLVER_IBI}",
                "--workers",
                "2",
                "--archiveaddress",
                self.front,
                *ANNOUNCING,
                env={"ARCHIVE_SERVICE_REGISTRATIONKEY": KEY},
            )
            fronts.append(node)
            self.nodes.append(node)
        for node in self.nodes:
            node.wait_answering(timeout=60)
        self.nginx = start_debian_nginx(fronts, public, self.port, self.site(both=True))
        wait_until(self.included, 30, "the Archive to be included at nginx's address")

    def site(self, both: bool) -> str:
        """contrib/nodes' site for these nodes; `both=False`: node b marked `down`."""
        a, b = self.nodes
        return rewrite(
            NODES_SITE.read_text(),
            ("listen 80;", f"listen {self.front};"),
            ("server 10.0.0.11:8080 ", f"server {a.address} "),
            ("server 10.0.0.12:8080 ", f"server {b.address} " + ("" if both else "down ")),
        )

    def balance(self, both: bool) -> None:
        """Rewrite the site and reload nginx (SIGHUP, as `systemctl reload nginx`)."""
        nginx: DebianNginx = self.nginx
        (nginx.etc / "sites-available" / "archive-service.conf").write_text(self.site(both))
        old = set(nginx_workers(nginx))
        nginx_pid = nginx.pid()
        assert nginx_pid is not None
        os.kill(nginx_pid, signal.SIGHUP)
        wait_until(lambda: not old & set(nginx_workers(nginx)), 20, "nginx to reload")

    def included(self) -> bool:
        records = [r for r in Registry(self.state).records() if r.serviceibi == SERVICE]
        return bool(records) and records[0].included and records[0].address == self.front

    def resolve(self, number: int) -> tuple[int, str]:
        status, headers, body = http_get(
            self.resolver_url + PURL, {"X-Forwarded-For": user_ip(number)}
        )
        return status, headers.get("Location", "") if status == 302 else body[:300].decode()

    def resolve_many(self, numbers: range, clients: int = 8) -> list[tuple[int, str]]:
        with ThreadPoolExecutor(clients) as pool:
            return list(pool.map(self.resolve, numbers))


def nginx_workers(nginx: DebianNginx) -> list[int]:
    pid = nginx.pid()
    return children(pid) if pid else []


def first_ip(query: dict) -> str:
    return query["clientinformation.ipaddress"].split()[0]


def test_two_thousand_resolutions_through_two_nodes_count_once(
    tmp_path, public, fronts, database_url
):
    bed = TwoNodes(tmp_path, public, fronts, database_url)
    with bed.nginx.explained():
        started = time.monotonic()
        results = bed.resolve_many(range(RESOLUTIONS))
        elapsed = time.monotonic() - started
        expected = f"http://{bed.front}{TARGET}"
        assert [r for r in results if r != (302, expected)] == [], bed.resolver.text()[-3000:]
        print(f"{RESOLUTIONS} resolutions in {elapsed:.1f} s")

        def acks(node: Serve) -> list[dict]:
            return [
                q
                for q, status in received(node.log(), "acknowledgment")
                if status == 200 and first_ip(q).startswith("10.")
            ]

        wait_until(
            lambda: sum(len(acks(n)) for n in bed.nodes) >= RESOLUTIONS,
            20,
            "every acknowledgment in the nodes' access logs",
        )
        asked, acked = {}, {}
        for name, node in zip("ab", bed.nodes):
            for query, _ in received(node.log(), "urlRequest"):
                asked[first_ip(query)] = name
            for query in acks(node):
                acked[first_ip(query)] = name
        users = {user_ip(n) for n in range(RESOLUTIONS)}
        assert set(asked) == set(acked) == users  # one urlRequest, one acknowledgment each
        crossed = sum(asked[ip] != acked[ip] for ip in users)
        print(f"{crossed} of {RESOLUTIONS} acknowledgments reached the other node")
        # Round robin over two nodes: a substantial share crosses (about half, or more when
        # the resolver's two requests alternate strictly); both nodes answer urlRequests.
        assert crossed >= RESOLUTIONS // 4, crossed
        assert {"a", "b"} <= set(asked.values())
        assert "acknowledgment to" not in bed.resolver.text()  # none failed or was unexpected

        # Replays: each node's acknowledgments sent again to the other node itself.
        replays = []
        for node, other in (bed.nodes, bed.nodes[::-1]):
            for query in acks(node)[:10]:
                replays.append(http_get(f"{other.url}?{urlencode(query)}"))
        assert [(s, body) for s, _, body in replays] == [(200, NOTICE)] * len(replays)

        for name in ("a", "b"):
            done = run_command(
                ["stats", "--state-dir", str(tmp_path / f"state-{name}")]
                + ["--database", database_url, "--format", "json"]
            )
            assert done.returncode == 0, done.stderr
            report = json.loads(done.stdout)
            assert report["total"] == RESOLUTIONS, (name, report)
            assert report["rejected"] == len(replays), (name, report)
            assert report["rejected_by_reason"] == {"replay": len(replays)}, (name, report)
