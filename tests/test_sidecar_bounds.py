"""Hostile sidecars (issue 15): deep nesting, alias bombs and huge files are a problem of their
item, reported by `check` with the bound they break, never a crash of the index or the service.

The big ones run in a process of their own, so a segfault or a runaway heap shows as a failed
test (with its exit status and memory), not as a dead test run."""

from __future__ import annotations

import fcntl
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from archive_service.cli import main
from archive_service.collection import sidecar
from archive_service.index.catalog import StoreCatalog
from archive_service.index.store import Store, Writer
from serve_process import Serve
from support import ROOT

BAD = "sid.inpe.br/mtc-m18/2020/01.02.03.04"
SERVED = "iconet.com.br/banon/2009/09.09.22.01"


def nested(size: int) -> str:
    """`size` bytes of flow sequences nested in each other, well-formed."""
    half = (size - len("dc: ")) // 2
    return "dc: " + "[" * half + "]" * half


def billion_laughs() -> str:
    """The classic: nine levels of nine aliases each, 9**9 strings once expanded."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    names = "abcdefghi"
    for previous, name in zip(names, names[1:]):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    lines.append("dc: {title: *i}")
    return "\n".join(lines) + "\n"


def put(collection: Path, text: str, directory: str = BAD) -> Path:
    item = collection / directory
    (item / "doc").mkdir(parents=True, exist_ok=True)
    (item / "doc" / "a.txt").write_text("a")
    path = item / "item.yaml"
    path.write_text(text)
    return path


# A child's ru_maxrss starts at its parent's RSS (fork copies the page tables, and exec keeps
# the larger of the old and the new image's peak): forked from a test run grown to 200 MB it
# reads 200 MB whatever it did. So a small Python forks the command and reports its peak.
_LAUNCHER = """
import os, resource, sys
report, args = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    os.execv(sys.executable, [sys.executable, "-m", "archive_service.cli", *args])
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as f:
    f.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}")
"""


def run_limited(args: list[str], timeout: float = 120) -> tuple[int, str, int, float]:
    """Run `python -m archive_service.cli ARGS` with at most 1 GiB of address space: exit
    status (negative: the signal), output, peak RSS in MB, seconds."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report"
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(report), *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        timer = threading.Timer(timeout, os.killpg, (proc.pid, signal.SIGKILL))
        timer.start()
        try:
            out = proc.stdout.read()
            proc.wait()
        finally:
            timer.cancel()
            proc.stdout.close()
        seconds = time.monotonic() - started
        assert proc.returncode == 0, f"the launcher ended with {proc.returncode}: {out!r}"
        code, kib = report.read_text().split()
    return int(code), out.decode(errors="replace"), int(kib) // 1024, seconds


def test_the_peak_memory_measured_is_the_commands_own():
    # The measure, not the bound: a test run that holds 300 MB must not lend them to its child.
    held = bytearray(300 << 20)
    held[:: resource.getpagesize()] = b"x" * len(held[:: resource.getpagesize()])
    code, out, rss, _ = run_limited(["--version"])
    assert code == 0, out
    assert rss < 100, f"{rss} MB for `archive-service --version`"
    del held


def test_a_1kb_nested_sidecar_is_a_problem_of_its_item(collection: Path, tmp_path, capsys):
    put(collection, nested(1024))
    with pytest.raises(sidecar.SidecarError, match=f"nested deeper than {sidecar.MAX_DEPTH}"):
        sidecar.read(collection / BAD / "item.yaml")

    assert main(["check", str(collection)]) == 1
    out = capsys.readouterr().out
    assert (
        f"error: {BAD}/item.yaml: nested deeper than {sidecar.MAX_DEPTH} levels "
        "(the most a sidecar may nest)"
    ) in out

    store = Store(collection, tmp_path / "state")
    Writer(store).refresh()
    catalog = StoreCatalog(store)
    try:
        assert catalog.item_at(BAD) is None
        assert catalog.lookup(SERVED) is not None  # the rest of the index is whole
        assert any(
            p.where == f"{BAD}/item.yaml" and "nested deeper" in p.message for p in catalog.problems
        )
    finally:
        catalog.close()


@pytest.mark.parametrize(
    "text, bound",
    [
        # 30,000 levels in 60 KB: stock CSafeLoader overflows the C stack (segfault).
        (nested(60 * 1024), f"nested deeper than {sidecar.MAX_DEPTH} levels"),
        (nested(200 * 1024), f"larger than {sidecar.MAX_BYTES} bytes"),
        (billion_laughs(), f"aliases expand to more than {sidecar.MAX_ALIAS_NODES} nodes"),
        (
            "x: &a 1\ndc: {"
            + ", ".join(f"k{i}: *a" for i in range(sidecar.MAX_ALIASES + 1))
            + "}\n",
            f"more than {sidecar.MAX_ALIASES} aliases",
        ),
        (
            "dc: {title: x}\n" + "# " + "x" * sidecar.MAX_BYTES + "\n",
            f"larger than {sidecar.MAX_BYTES} bytes",
        ),
    ],
    ids=["nested-60kb", "nested-200kb", "billion-laughs", "many-aliases", "too-large"],
)
@pytest.mark.process
def test_check_and_index_survive_a_hostile_sidecar(collection: Path, tmp_path, text, bound):
    put(collection, text)
    code, out, rss, seconds = run_limited(["check", str(collection)])
    print(f"check: status {code}, {rss} MB, {seconds:.2f} s")
    assert code == 1, out
    assert f"error: {BAD}/item.yaml: {bound}" in out
    assert "Traceback" not in out
    assert rss < 200 and seconds < 30

    code, out, rss, seconds = run_limited(
        ["index", "--collection", str(collection), "--state-dir", str(tmp_path / "state")]
    )
    print(f"index: status {code}, {rss} MB, {seconds:.2f} s")
    assert code == 0, out
    assert "1 problem(s)" in out and "Traceback" not in out
    assert rss < 200 and seconds < 30


def test_the_yaml_a_sidecar_may_hold_is_read_as_before(tmp_path):
    # Within the bounds nothing changes: many indicators (so the exact check runs), an anchor
    # used a few times, nesting as deep as the bound allows.
    deep = "[" * (sidecar.MAX_DEPTH - 1) + "]" * (sidecar.MAX_DEPTH - 1)
    text = (
        "timestamp: 2012-07-12T18:08:00Z\nlanguage: &l pt-BR\n"
        "dc:\n  title: 'a - b - c: d'\n  language: [*l, *l]\n"
        + f"x-unknown: {deep}\n"
        + "x-notes: ["
        + ", ".join(f"'{i}: -'" for i in range(100))
        + "]\n"
    )
    path = tmp_path / "item.yaml"
    path.write_text(text)
    side = sidecar.read(path)
    assert side.dc == {"title": ["a - b - c: d"], "language": ["pt-BR", "pt-BR"]}
    assert side.unknown_keys == ["x-notes", "x-unknown"]


@pytest.mark.process
def test_a_hostile_sidecar_takes_neither_the_master_nor_the_indexer_down(
    collection: Path, tmp_path
):
    """A 60 KB nested sidecar at a cold start (walked by the early process, or the master),
    then changed while serving (the indexer), then changed again with a SIGHUP (the reload's
    walk, in the master)."""
    bomb = put(collection, nested(60 * 1024))
    serve = Serve(
        tmp_path,
        "--collection",
        str(collection),
        "--state-dir",
        str(tmp_path / "state"),
        "--no-announce",
    )
    try:
        serve.wait_answering(timeout=60)
        serve.wait_log("started the indexer of")
        bomb.write_text(nested(60 * 1024 + 2))  # the indexer reads it
        serve.wait_log(
            f"archive_service.index.store: error: {BAD}/item.yaml: nested deeper than", timeout=30
        )  # said by the indexer
        # The indexer stopped while idle (not holding the write lock, which the reload's walk
        # needs): only the reload's walk, in the master, reads the sidecar.
        indexer = int(re.search(r"started the indexer of .* \(pid (\d+)\)", serve.log())[1])
        lock = os.open(f"{Store(collection, tmp_path / 'state').path}.write.lock", os.O_RDWR)
        try:
            while True:
                os.kill(indexer, signal.SIGSTOP)
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.kill(indexer, signal.SIGCONT)
                    time.sleep(0.1)
                else:
                    fcntl.flock(lock, fcntl.LOCK_UN)
                    break
        finally:
            os.close(lock)
        try:
            bomb.write_text(nested(60 * 1024 + 4))
            serve.signal(signal.SIGHUP)
            serve.wait_log("indexed 15 items from", count=2)  # create_app, again
            assert serve.process.poll() is None, serve.log()
        finally:
            try:
                os.kill(indexer, signal.SIGCONT)
            except ProcessLookupError:
                pass  # stopped by the worker that started it, gone with the reload
        serve.wait_answering(timeout=30)
        log = serve.log()
        assert "exited with status" not in log, log  # the indexer never died
        assert "Traceback" not in log, log
        assert serve.stop() == 0
    finally:
        serve.kill()


@pytest.mark.process
def test_deposit_refuses_to_edit_a_hostile_sidecar(tmp_path):
    """`deposit --nextedition-of` and `delete` load the other item's sidecar to edit it."""
    path = tmp_path / "item.yaml"
    path.write_text(nested(60 * 1024))
    code = (
        "import sys; from pathlib import Path\n"
        "from archive_service.collection import sidecar_update\n"
        "try:\n    sidecar_update.load(Path(sys.argv[1]))\n"
        "except ValueError as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done
    assert f"nested deeper than {sidecar.MAX_DEPTH} levels" in done.stdout


def test_a_fifo_swapped_in_for_the_sidecar_is_refused_not_waited_on(tmp_path):
    """The walk finds item.yaml a file, then reads it: a FIFO put there in between used to
    block the indexer until some writer came (forever). It is an unreadable sidecar now."""
    fifo = tmp_path / "item.yaml"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            sidecar.read(fifo)
        except BaseException as exc:  # noqa: BLE001 - the test reports what it was
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # release it, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=10)
        pytest.fail("reading a FIFO sidecar waited for a writer")
    assert len(outcome) == 1 and isinstance(outcome[0], sidecar.SidecarError), outcome
    assert "not a regular file" in str(outcome[0])


@pytest.mark.parametrize("kind", ["link loop", "directory"])
def test_a_sidecar_that_is_there_but_cannot_be_read_is_a_problem_of_its_item(
    collection: Path, tmp_path, capsys, kind
):
    """An item.yaml the walk could not stat (a link loop) or that is no file was taken for
    no sidecar: the item was indexed, served and claimed without its metadata, silently."""
    sidecar_path = put(collection, "dc: {}\n")
    sidecar_path.unlink()
    if kind == "link loop":
        sidecar_path.symlink_to("item.yaml")
    else:
        sidecar_path.mkdir()
    store = Store(collection, tmp_path / "state")
    Writer(store).refresh()
    catalog = StoreCatalog(store)
    try:
        assert catalog.item_at(BAD) is None
        assert catalog.lookup(SERVED) is not None  # the rest of the index is whole
    finally:
        catalog.close()
    assert main(["check", str(collection)]) == 1
    assert f"error: {BAD}/item.yaml: cannot read" in capsys.readouterr().out


def test_reading_sidecars_keeps_none_of_their_long_values(tmp_path):
    """The loader's cache of plain scalars' tags kept up to 4,096 of them whatever their
    length: sidecars each with one 60 KB plain value (an OAI provider's "abstracts", written
    plain by the import) pinned 240 MB in every process that reads sidecars (the indexer and
    each of its readers) (adversarial pass over issue 30, second round)."""
    import gc
    import tracemalloc

    path = tmp_path / sidecar.SIDECAR
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(100):
            path.write_text(f"state: Original\ndc:\n  description: v{i}{'x' * 60_000}\n")
            assert sidecar.read(path).dc["description"][0].startswith(f"v{i}x")
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 1_000_000, f"{kept} bytes kept after reading 100 sidecars of 60 KB"
