"""Several `serve` nodes of one Archive on one PostgreSQL `database`: exactly one holds the
Archive's membership (serve/membership.py). Stopping a node that does not hold it sends no
exclusionRequest; the holder hands over while another node runs and excludes as the last one;
a holder killed with SIGKILL is replaced within TAKEOVER_WITHIN seconds. The resolver is the
real `archive-service resolver serve`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from archive_service.common import inclusion, postgres
from archive_service.resolver.registry import Registry
from archive_service.serve import membership
from fronts import CONTRIB, NGINX, fetch, rewrite, start_debian_nginx
from serve_process import (
    ANNOUNCING,
    ROOT,
    SERVICE,
    Process,
    Serve,
    free_port,
    http_get,
    wait_until,
)

KEY = "5550001234-9990004321"
RESOLVER_IBI = "J8LNKB5R7W/3FUQHC5"
# A holder's master killed: its announcer sees it within 0.2 s and exits, the server frees
# its locks, the standby queued on the lock takes it and joins: 0.06-1.04 s measured
# (bench/membership.py, bench/RESULTS.md).
TAKEOVER_WITHIN = 10


# ------------------------------------------------------------------ the locks themselves


@pytest.fixture
def nodes(database_url):
    made: list[membership.Membership] = []

    def node() -> membership.Membership:
        made.append(membership.Membership(database_url, SERVICE))
        return made[-1]

    yield node
    for member in made:
        member.close()


def test_one_holder_and_the_others_counted(nodes):
    a, b, c = nodes(), nodes(), nodes()
    assert a.acquire(lambda: False)
    gave_up = []
    assert not b.acquire(lambda: gave_up.append(1) or len(gave_up) > 2)
    assert a.others() == 2 and b.others() == 2
    assert "archive-service announcer" in b.holder() and a.holder() == ""
    c.close()
    # The server ends a closed session's backend, and frees its locks, a moment later.
    wait_until(lambda: a.others() == 1, 5, "the closed node's locks to go")


def test_the_holder_hands_over_to_a_waiting_node(nodes):
    a, b = nodes(), nodes()
    assert a.acquire(lambda: False)
    got = []
    waiter = threading.Thread(target=lambda: got.append(b.acquire(lambda: False)))
    waiter.start()
    time.sleep(0.3)
    a.leave_node()
    assert a.others() == 1
    assert a.hand_over()
    waiter.join(5)
    assert got == [True] and b.held and not a.held


def test_the_last_node_takes_the_membership_back(nodes):
    a = nodes()
    b = nodes()
    assert a.acquire(lambda: False)
    b.close()  # stopping, never queued
    a.leave_node()
    wait_until(lambda: a.others() == 0, 5, "the closed node's locks to go")
    started = time.monotonic()
    assert not a.hand_over(wait=0.5)
    assert a.held and time.monotonic() - started < 3


def test_a_closed_connection_frees_the_membership(nodes):
    a, b = nodes(), nodes()
    assert a.acquire(lambda: False)
    a.close()  # what the server does when the holder's process dies
    assert b.acquire(lambda: False)


def test_archives_sharing_a_database_do_not_share_a_membership(database_url):
    one = membership.Membership(database_url, SERVICE)
    other = membership.Membership(database_url, "sid.inpe.br/mtc-m21/2012/06.05.15.34.39")
    try:
        assert one.acquire(lambda: False) and other.acquire(lambda: False)
        assert one.others() == 0
    finally:
        one.close()
        other.close()


def test_the_service_ibi_is_case_insensitive():
    assert membership.lock_key("member", SERVICE) == membership.lock_key("member", SERVICE.upper())
    assert membership.lock_key("member", SERVICE) != membership.lock_key("node", SERVICE)


# ------------------------------------------------------------- real nodes, real resolver


class Resolver:
    """`archive-service resolver serve` with SERVICE registered under KEY."""

    def __init__(self, base: Path, *settings: str):
        self.state = base / "resolver-state"
        self.settings = settings
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/{RESOLVER_IBI}"
        self.log = base / f"resolver-{self.port}.log"
        self.marks = 0
        done = subprocess.run(
            [sys.executable, "-m", "archive_service.cli", "resolver", "register"]
            + ["--state-dir", str(self.state), *settings, "--serviceibi", SERVICE, "--key", KEY],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        self.process = Process(
            ["resolver", "serve", "--state-dir", str(self.state), *settings]
            + ["--bind", f"127.0.0.1:{self.port}", "--timeout", "3"],
            self.log,
        ).start()
        self.process.wait_answering(f"http://127.0.0.1:{self.port}/")

    def received(self, subject: str) -> int:
        """The requests of `subject` it logged. Its access log is written in batches
        (common/access.py): a request of our own, once in the log, says that every line
        before it is (it runs one worker)."""
        self.marks += 1
        marker = f"/health?logged={self.marks}"
        http_get(f"http://127.0.0.1:{self.port}{marker}")
        wait_until(lambda: marker in self.process.text(), 10, "the access log")
        return self.process.text().count(f"servicesubject={subject}&")

    def record(self):
        (record,) = [r for r in Registry(self.state).records() if r.serviceibi == SERVICE]
        return record

    def included(self) -> bool:
        return self.record().included


@pytest.fixture
def resolver(tmp_path):
    started = Resolver(tmp_path)
    yield started
    started.process.kill()


class Node:
    """A `serve` node announcing to `resolver`, sharing `database`; `args` add settings."""

    def __init__(self, tmp_path: Path, name: str, resolver: Resolver, database: str, *args: str):
        self.state = tmp_path / f"state-{name}"
        self.serve = Serve(
            tmp_path,
            "--state-dir",
            str(self.state),
            "--database",
            database,
            "--resolver",
            resolver.url,
            "--workers",
            "1",
            *ANNOUNCING,
            *args,
            env={"ARCHIVE_SERVICE_REGISTRATIONKEY": KEY},
        )
        self.tree: list[int] = []

    def state_is(self, *states: str) -> bool:
        known = inclusion.read(self.state)
        return known is not None and known.state in states

    def wait_state(self, *states: str, timeout: float = 30) -> None:
        wait_until(
            lambda: self.state_is(*states),
            timeout,
            f"{self.state.name} to be {' or '.join(states)} (is {inclusion.read(self.state)}):\n"
            + self.serve.log()[-3000:],
        )

    def processes(self) -> list[int]:
        """The master and every process under it (to see them all gone after a SIGKILL)."""
        from serve_process import children

        found, todo = [], [self.serve.process.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo += children(pid)
        return found


@pytest.fixture
def cluster(tmp_path, resolver, database_url):
    made: list[Node] = []

    def node(name: str) -> Node:
        made.append(Node(tmp_path, name, resolver, database_url))
        return made[-1]

    yield node
    for each in made:
        each.serve.kill()
        for pid in each.tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def two_nodes(cluster) -> tuple[Node, Node]:
    """Node a holding the membership (included), then node b standing by."""
    a = cluster("a")
    a.wait_state("included")
    b = cluster("b")
    b.wait_state("standby")
    return a, b


@pytest.mark.process
@pytest.mark.slow
def test_only_the_last_node_to_stop_sends_the_exclusion(cluster, resolver):
    a, b = two_nodes(cluster)
    assert "held by another node (archive-service announcer" in inclusion.read(b.state).detail
    assert resolver.received("inclusionRequest") == 1
    status, _, body = http_get(f"http://{b.serve.address}/health")
    assert status == 200 and json.loads(body)["inclusion"]["state"] == "standby"

    # The node that does not hold the membership stops: the Archive stays included.
    assert b.serve.stop() == 0
    assert resolver.received("exclusionRequest") == 0 and resolver.included()
    assert inclusion.read(b.state).state == "left"

    # The holder stops while another node runs: it hands over, and the new holder joins.
    c = cluster("c")
    c.wait_state("standby")
    assert a.serve.stop() == 0
    c.wait_state("included", timeout=15)
    assert "handed the membership to another node" in inclusion.read(a.state).detail
    assert resolver.received("exclusionRequest") == 0 and resolver.included()
    assert resolver.received("inclusionRequest") == 2

    # The last node stops: the exclusion is sent.
    assert c.serve.stop() == 0
    assert resolver.received("exclusionRequest") == 1 and not resolver.included()
    assert "the last node" in inclusion.read(c.state).detail


@pytest.mark.process
@pytest.mark.slow
def test_a_killed_holder_is_replaced_within_the_stated_time(cluster, resolver):
    a, b = two_nodes(cluster)
    a.tree = a.processes()
    killed = time.monotonic()
    a.serve.process.send_signal(signal.SIGKILL)
    b.wait_state("included", timeout=TAKEOVER_WITHIN)
    took = time.monotonic() - killed
    print(f"membership moved in {took:.2f} s")
    assert resolver.received("exclusionRequest") == 0 and resolver.included()
    a.serve.process.wait(5)
    wait_until(
        lambda: all(not os.path.exists(f"/proc/{pid}/cmdline") or _zombie(pid) for pid in a.tree),
        15,
        "the killed node's processes to end",
    )
    assert b.serve.stop() == 0
    assert resolver.received("exclusionRequest") == 1


@pytest.mark.process
@pytest.mark.slow
def test_a_reload_keeps_the_membership_where_it_is(cluster, resolver):
    a, b = two_nodes(cluster)
    for node in (a, b):
        node.serve.signal(signal.SIGHUP)
        node.serve.wait_log("the announced pairs are unchanged, the announcer goes on")
    time.sleep(2)  # what a wrongly restarted announcer would send comes within this
    assert resolver.received("inclusionRequest") == 1
    assert a.state_is("included") and b.state_is("standby")
    assert b.serve.stop() == 0 and a.serve.stop() == 0
    assert resolver.received("exclusionRequest") == 1 and not resolver.included()


@pytest.mark.process
@pytest.mark.slow
def test_a_holder_whose_connection_breaks_becomes_a_standby(cluster, resolver, database_url):
    import psycopg

    a, b = two_nodes(cluster)
    with psycopg.connect(database_url, autocommit=True) as conn:
        (killed,) = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
            "AND mode = 'ExclusiveLock' AND granted"
        ).fetchall()
        assert killed == (True,)
    b.wait_state("included", timeout=TAKEOVER_WITHIN)
    a.wait_state("standby", timeout=TAKEOVER_WITHIN)  # it noticed, connected again, queued
    assert a.serve.stop() == 0 and resolver.received("exclusionRequest") == 0
    assert b.serve.stop() == 0 and resolver.received("exclusionRequest") == 1


@pytest.mark.process
def test_a_database_that_does_not_answer_holds_nothing_up(tmp_path, resolver):
    node = Node(tmp_path, "a", resolver, f"postgresql://nobody@127.0.0.1:{free_port()}/none")
    try:
        node.serve.wait_answering()
        node.wait_state("failed")
        assert "cannot connect" in inclusion.read(node.state).detail
        started = time.monotonic()
        assert node.serve.stop() == 0 and time.monotonic() - started < 10
        assert resolver.received("inclusionRequest") == 0
        assert resolver.received("exclusionRequest") == 0
        assert "Traceback" not in node.serve.log()
    finally:
        node.serve.kill()


def _zombie(pid: int) -> bool:
    from serve_process import state_of

    return state_of(pid) in ("Z", "gone")


def test_without_a_database_nothing_of_this_is_imported():
    # The SQLite default runs the announcer as before: serve/membership.py only with database.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, archive_service.serve.runner; "
            "print('archive_service.serve.membership' in sys.modules, 'psycopg' in sys.modules)",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.split() == ["False", "False"], done.stderr


def test_the_session_names_itself_and_probes_the_connection(database_url):
    conn = postgres.session(database_url, "archive-service test")
    try:
        assert conn.execute("SHOW tcp_keepalives_idle").fetchone()[0] in ("5", "5s")
        assert conn.execute("SHOW application_name").fetchone()[0] == "archive-service test"
    finally:
        conn.close()


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.skipif(NGINX is None, reason="nginx is not installed (Debian: apt-get install nginx)")
def test_two_nodes_behind_nginx_join_once_and_leave_once(
    tmp_path, public, fronts, resolver, database_url
):
    """contrib/nodes' nginx in front of two nodes announcing its address: the resolver's
    call-back goes through nginx to either node; stopping one node keeps the Archive
    included and answering; stopping the other excludes it."""
    port = free_port()
    front = f"127.0.0.1:{port}"
    a, b = (Node(tmp_path, n, resolver, database_url, "--archiveaddress", front) for n in "ab")
    fronts += [a.serve, b.serve]
    site = rewrite(
        (CONTRIB / "nodes" / "nginx-two-nodes.conf").read_text(),
        ("listen 80;", f"listen {front};"),
        ("server 10.0.0.11:8080 ", f"server {a.serve.address} "),
        ("server 10.0.0.12:8080 ", f"server {b.serve.address} "),
    )
    start_debian_nginx(fronts, public, port, site)
    wait_until(
        lambda: any(x.state_is("included") and y.state_is("standby") for x, y in ((a, b), (b, a))),
        30,
        "one node included, the other standing by",
    )
    holder, standby = (a, b) if a.state_is("included") else (b, a)
    record = resolver.record()
    assert (record.included, record.address, record.confirmation) == (True, front, "successful")
    confirm = f"http://{front}/{SERVICE}?servicesubject=inclusionConfirmationRequest"
    assert standby.serve.stop() == 0
    assert [fetch(confirm) for _ in range(10)] == [(200, b"confirmation yes")] * 10
    assert resolver.received("exclusionRequest") == 0 and resolver.included()
    assert holder.serve.stop() == 0
    assert resolver.received("exclusionRequest") == 1 and not resolver.included()
