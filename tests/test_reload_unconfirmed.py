"""A SIGHUP after the resolver could not confirm the inclusion sends it again (issue 18): the
admin fixes the web server in front, reloads, and the Archive is confirmed, with the real
`archive-service resolver serve` on loopback."""

from __future__ import annotations

import signal
import socket
import threading

import pytest

from archive_service.common import inclusion
from serve_process import ANNOUNCING, SERVICE, Process, Serve, free_port, run_command

pytestmark = [pytest.mark.process, pytest.mark.slow]

KEY = "5550001234-9990004321"
RESOLVER_IBI = "J8LNKB5R7W/3FUQHC5"


class Forwarder:
    """The web server in front, reduced to a TCP relay from `port` to `target`."""

    def __init__(self, port: int, target: tuple[str, int]):
        self.listener = socket.create_server(("127.0.0.1", port))
        self.target = target
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.listener.close()


def test_sighup_after_an_unconfirmed_inclusion_sends_it_again(tmp_path):
    resolver_state = tmp_path / "resolver"
    registered = run_command(
        ["resolver", "register", "--state-dir", str(resolver_state)]
        + ["--serviceibi", SERVICE, "--key", KEY]
    )
    assert registered.returncode == 0, registered.stderr
    port = free_port()
    resolver = Process(
        ["resolver", "serve", "--state-dir", str(resolver_state)]
        + ["--bind", f"127.0.0.1:{port}", "--timeout", "3"],
        tmp_path / "resolver.log",
    ).start()
    front_port = free_port()  # nothing listens there yet: the front is not set up
    state = tmp_path / "state"
    serve = None
    front = None
    try:
        resolver.wait_answering(f"http://127.0.0.1:{port}/")
        serve = Serve(
            tmp_path,
            "--state-dir",
            str(state),
            "--resolver",
            f"http://127.0.0.1:{port}/{RESOLVER_IBI}",
            "--archiveaddress",
            f"127.0.0.1:{front_port}",
            *ANNOUNCING,
            env={"ARCHIVE_SERVICE_REGISTRATIONKEY": KEY},
        )
        serve.wait_log("status.confirmation unsuccessful")
        assert inclusion.read(state).state == "unconfirmed"

        front = Forwarder(front_port, ("127.0.0.1", serve.port))  # the admin fixes the front
        serve.signal(signal.SIGHUP)
        serve.wait_log("status.confirmation successful")
        assert inclusion.read(state).state == "included"
        assert serve.log().count("inclusionRequest") >= 2
        assert serve.stop() == 0
        assert inclusion.read(state).state == "left"
    finally:
        if serve is not None:
            serve.kill()
        if front is not None:
            front.close()
        resolver.stop()
