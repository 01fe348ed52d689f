"""contrib/nodes/: two nodes of one Archive behind nginx or HAProxy, their settings and the
database credential. nginx and HAProxy check the files themselves (`nginx -t`, `haproxy -c`);
the real nginx balances two real `serve` nodes and passes over one that is killed."""

from __future__ import annotations

import ipaddress
import re
import subprocess

import pytest

from archive_service import settings
from archive_service.common.net import client_address
from fronts import (
    CONTRIB,
    NGINX,
    NGINX_SITE,
    executable,
    fetch,
    rewrite,
    serve_behind,
    start_debian_nginx,
)
from serve_process import SERVICE, free_port, wait_until

NODES = CONTRIB / "nodes"
NGINX_NODES = NODES / "nginx-two-nodes.conf"
HAPROXY_CFG = NODES / "haproxy.cfg"
NODE_SETTINGS = NODES / "archive-service-node.yaml"
DROP_IN = NODES / "archive-service-postgresql.conf"
HAPROXY = executable("haproxy")
NODE_A, NODE_B = "10.0.0.11:8080", "10.0.0.12:8080"

needs_nginx = pytest.mark.skipif(
    NGINX is None, reason="nginx is not installed (Debian: apt-get install nginx)"
)


@needs_nginx
def test_the_nginx_example_passes_nginx_t(tmp_path):
    main = tmp_path / "nginx.conf"
    main.write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{\n  access_log off;\n  client_body_temp_path {tmp_path}/body;\n"
        f"  proxy_temp_path {tmp_path}/proxy;\n  include {NGINX_NODES};\n}}\n"
    )
    done = subprocess.run(
        [NGINX, "-t", "-c", str(main), "-p", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "test is successful" in done.stderr, done.stderr


@pytest.mark.skipif(
    HAPROXY is None, reason="haproxy is not installed (Debian: apt-get install haproxy)"
)
def test_the_haproxy_example_passes_haproxy_c():
    done = subprocess.run(
        [HAPROXY, "-c", "-f", str(HAPROXY_CFG)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_haproxy_probes_each_node_health():
    text = HAPROXY_CFG.read_text()
    assert "option httpchk GET /health" in text and "http-check expect status 200" in text
    assert re.findall(r"^\s*server \S+ (\S+) check$", text, re.M) == [NODE_A, NODE_B]


def test_nginx_example_balances_what_the_one_node_site_proxies():
    one, two = NGINX_SITE.read_text(), NGINX_NODES.read_text()
    proxied = re.findall(r"location (\S+ \S+) \{\n\s+proxy_pass", one)
    assert proxied and re.findall(r"location (\S+ \S+) \{\n\s+proxy_pass", two) == proxied
    assert two.count("proxy_pass http://archive_service_nodes;") == len(proxied)
    for node in (NODE_A, NODE_B):
        assert f"server {node} max_fails=2 fail_timeout=10s;" in two
    assert "proxy_next_upstream error timeout http_502 http_503;" in two


def test_the_node_settings_load_and_hold_no_password():
    config = settings.load(str(NODE_SETTINGS), environ={})
    assert config.database.startswith("postgresql://archive@db.example.org/archive?")
    assert "sslmode=verify-full" in config.database
    assert config.index_watch == "poll"
    assert config.archiveaddress == "archive.example.org"


def test_the_drop_in_hands_the_password_to_libpq_as_a_credential():
    text = DROP_IN.read_text()
    assert "LoadCredential=pgpass:/etc/archive-service/pgpass" in text
    assert "Environment=PGPASSFILE=%d/pgpass" in text


@needs_nginx
@pytest.mark.process
@pytest.mark.slow
def test_nginx_passes_over_a_killed_node(public, tmp_path, fronts):
    port = free_port()
    a = serve_behind(public, tmp_path, port, fronts, "--state-dir", str(tmp_path / "a"))
    b = serve_behind(public, tmp_path, port, fronts, "--state-dir", str(tmp_path / "b"))
    site = rewrite(
        NGINX_NODES.read_text(),
        ("listen 80;", f"listen 127.0.0.1:{port};"),
        (f"server {NODE_A} ", f"server {a.address} "),
        (f"server {NODE_B} ", f"server {b.address} "),
    )
    nginx = start_debian_nginx(fronts, public, port, site)
    confirm = f"{nginx.url}/{SERVICE}?servicesubject=inclusionConfirmationRequest"
    with nginx.explained():
        for _ in range(10):
            assert fetch(confirm) == (200, b"confirmation yes")
        asked = "servicesubject=inclusionConfirmationRequest"
        # Round robin; the access log is written in batches (common/access.py): polled.
        wait_until(
            lambda: a.log().count(asked) >= 3 and b.log().count(asked) >= 3, 10, "round robin"
        )
        a.kill()
        assert [fetch(confirm)[0] for _ in range(20)] == [200] * 20


def test_the_contrib_index_names_the_nodes_folder():
    assert "[`nodes/`](nodes/)" in (CONTRIB / "README.md").read_text()


BALANCER = "10.0.0.10"  # the balancer's address as the nodes see it (the node settings' own)


def test_the_node_settings_take_the_user_from_the_balancer_alone():
    # Without trusted_proxies, a node behind a balancer on another machine trusted only
    # loopback: every user was the balancer's address, for licensed items (access by network)
    # and for COUNTER (one user, double clicks of different people merged).
    config = settings.load(str(NODE_SETTINGS), environ={})
    trusted = tuple(ipaddress.ip_network(n) for n in config.trusted_proxies)
    # HAProxy adds its own X-Forwarded-For after the client's; nginx appends to it.
    through = {"REMOTE_ADDR": BALANCER, "HTTP_X_FORWARDED_FOR": "150.163.2.175,192.0.2.99"}
    assert str(client_address(through, trusted)) == "192.0.2.99"
    direct = {"REMOTE_ADDR": "192.0.2.99", "HTTP_X_FORWARDED_FOR": "150.163.2.175"}
    assert str(client_address(direct, trusted)) == "192.0.2.99"
    for balancer in (HAPROXY_CFG, NGINX_NODES):
        assert "trusted_proxies" in balancer.read_text(), balancer.name
