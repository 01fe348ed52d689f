"""`archive-service deposit` and `delete` on a copy of the sample collection: what they write,
what urlRequest then answers, that `check` still passes, and that they refuse cleanly."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from archive_service import cli, deposit
from archive_service.collection import items as index
from archive_service.collection import sidecar, sidecar_update
from archive_service.protocol import ibip, pairs
from archive_service.web import create_app
from support import ADDRESS, ROOT, Client

IP = "150.163.2.174"
OAIS_2002 = "sid.inpe.br/mtc-m18@80/2009/07.21.14.43"  # en, ibip 8JMKD3MGP8W/35MMLL8
BANON = "iconet.com.br/banon/2009/09.09.22.01"  # pt, ibip LK47B6W/362SFKH, one comment line


# ----------------------------------------------------------------------------- helpers


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def deposit_args(settings: dict, *extra, ip: str | None = IP, address: str = ADDRESS) -> list[str]:
    args = [
        "deposit",
        "--collection",
        settings["collection"],
        "--archiveaddress",
        address,
        "--state-dir",
        settings["state_dir"],
    ]
    if ip:
        args += ["--archiveip", ip]
    return args + [str(e) for e in extra]


def printed(out: str) -> dict[str, list[str]]:
    """The output's lines grouped by their first word (rep, ibip, url, linked, ...)."""
    got: dict[str, list[str]] = {}
    for line in out.splitlines():
        word, _, rest = line.partition(" ")
        got.setdefault(word, []).append(rest)
    return got


def answer(settings: dict, ibi: str, **extra) -> dict[str, str]:
    client = Client(create_app(settings), "")
    return dict(pairs.parse(client.url_request(ibi, **extra).text))


def check(capsys, collection) -> int:
    code, out, _ = run(capsys, "check", collection)
    assert code == 0, out
    return code


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (with its bytes) and directory under `root`."""
    found: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        found[rel] = path.read_bytes() if path.is_file() else None
    return found


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    upload = tmp_path / "upload"
    upload.mkdir()
    report = upload / "relatório.pdf"
    report.write_bytes(b"%PDF-1.4 a report\n")
    data = upload / "dados.csv"
    data.write_text("a,b\n1,2\n")
    os.chmod(report, 0o600)  # a private upload: the item's copy must still be readable
    return {"report": report, "data": data}


# ----------------------------------------------------------------------------- deposit


@pytest.mark.parametrize(
    "resolver, base",
    [("https://purl.example.net/J8LNKB5R7W/3FUQHC5", "https://purl.example.net/"), ("none", None)],
)
def test_the_persistent_url_is_the_configured_resolvers(capsys, settings, files, resolver, base):
    """A deposit wrote and printed http://urlib.net/<ibi> whatever the Archive's resolver was
    (issue 31: the rule of the persistent URL written twice, disagreeing)."""
    args = deposit_args(settings, files["report"], "--title", "Relatório", "--resolver", resolver)
    code, out, err = run(capsys, *args)
    assert (code, err) == (0, "")
    got = printed(out)
    [rep], [label] = got["rep"], got["ibip"]
    side = sidecar.read(Path(settings["collection"]) / rep / "item.yaml")
    if base is None:
        assert "url" not in got and "identifier" not in side.dc
    else:
        assert got["url"] == [base + rep, base + label]
        assert side.dc["identifier"] == [base + rep]


def test_deposit_is_answered_by_url_request_and_passes_check(capsys, settings, collection, files):
    code, out, err = run(
        capsys,
        *deposit_args(
            settings,
            files["report"],
            files["data"],
            "--target",
            "relatório.pdf",
            "--language",
            "pt-br",
            "--title",
            "Relatório técnico",
        ),
    )
    assert (code, err) == (0, "")
    got = printed(out)
    [rep], [label] = got["rep"], got["ibip"]
    assert rep.startswith("sid.inpe.br/mtc-m16c/")
    assert got["url"] == [f"http://urlib.net/{rep}", f"http://urlib.net/{label}"]
    decoded = ibip.decode(label)
    assert (decoded.ip, decoded.port) == (IP, 800)

    item = collection / rep
    assert sorted(p.name for p in item.iterdir()) == ["doc", "item.yaml"]
    assert (item / "doc" / "relatório.pdf").read_bytes() == files["report"].read_bytes()
    assert (item / "doc" / "dados.csv").read_bytes() == files["data"].read_bytes()
    assert stat.S_IMODE((item / "doc" / "relatório.pdf").stat().st_mode) & 0o044  # umask, not 0600
    assert not [p for p in collection.iterdir() if p.name.startswith(".deposit-")]
    side = sidecar.read(item / "item.yaml")
    assert (side.ibip, side.language, side.target, side.state) == (
        label,
        "pt-BR",
        "relatório.pdf",
        "Original",
    )
    assert side.dc["title"] == ["Relatório técnico"] and side.dc["language"] == ["pt-BR"]
    assert side.dc["identifier"] == [f"http://urlib.net/{rep}"]
    assert side.dc["date"] == [side.timestamp.strftime("%Y-%m-%d")]
    assert side.timestamp.replace(second=0) == decoded.time.replace(second=0)

    url = f"http://{ADDRESS}/col/{rep}/doc/relat%C3%B3rio.pdf"
    for form in (rep, label, label.lower()):
        got = answer(settings, form)
        assert got["ibi"] == f"{{rep {rep} ibip {label}}}"
        assert (got["url"], got["state"], got["contenttype"]) == (url, "Original", "Data")
    client = Client(create_app(settings), "")
    assert client.get_url(url).body == files["report"].read_bytes()
    metadata = answer(settings, label, verblist="GetMetadata")["url.metadata"]
    assert "Relatório técnico" in client.get_url(metadata).text
    check(capsys, collection)


@pytest.mark.process
def test_deposit_through_the_console_command_and_config_file(collection, settings, files):
    """The real command, reading the sample's config file, then `check` and `query`."""
    config = collection / "archive-service.yaml"  # collection: . (this copy), localhost:8080
    base = [sys.executable, "-m", "archive_service.cli"]
    options = [
        "--config",
        str(config),
        "--archiveaddress",
        ADDRESS,
        "--state-dir",
        settings["state_dir"],
    ]
    done = subprocess.run(
        base + ["deposit", *options, str(files["data"])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    [rep] = printed(done.stdout)["rep"]
    assert "ibip" not in printed(done.stdout)  # no archiveip in the config: the name only
    assert "ibip" not in yaml.safe_load((collection / rep / "item.yaml").read_text())
    done = subprocess.run(
        base + ["check", str(collection)], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stdout
    done = subprocess.run(
        base + ["query", *options, rep], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0
    # The single file is the default target (SPEC §7).
    assert f"url http://{ADDRESS}/col/{rep}/doc/dados.csv" in done.stdout.splitlines()
    assert f"ibi {{rep {rep}}}" in done.stdout.splitlines()


def test_deposit_is_filed_under_the_ibip_when_no_name_can_be_minted(
    capsys, settings, collection, files
):
    settings["archiveaddress"] = "localhost:8080"  # one word: no repository name (ID Table 6.1)
    code, out, _ = run(capsys, *deposit_args(settings, files["data"], address="localhost:8080"))
    assert code == 0
    got = printed(out)
    assert "rep" not in got
    [label] = got["ibip"]
    assert ibip.decode(label).port == 8080  # the port of archiveaddress
    assert (collection / label / "doc" / "dados.csv").is_file()
    assert "ibip" not in yaml.safe_load((collection / label / "item.yaml").read_text())
    reply = answer(settings, label)
    assert reply["ibi"] == f"{{ibip {label}}}"
    assert reply["url"] == f"http://localhost:8080/col/{label}/doc/dados.csv"
    check(capsys, collection)


def test_deposit_without_any_form_is_refused(capsys, settings, collection, files):
    before = snapshot(collection)
    code, out, err = run(
        capsys, *deposit_args(settings, files["data"], ip=None, address="localhost:8080")
    )
    assert code == 1 and out == ""
    assert "no IBI can be minted" in err and "two or more words" in err
    # the options deposit has (it has no --ip, which mint's message named)
    assert "an IBIp needs an IP address (archiveip or --archiveip)" in err
    assert snapshot(collection) == before


def test_nextedition_of_links_the_old_item(capsys, settings, collection, files):
    old_sidecar = collection / BANON / "item.yaml"
    old_text = old_sidecar.read_text()
    code, out, err = run(
        capsys, *deposit_args(settings, files["report"], "--nextedition-of", "LK47B6W/362SFKH")
    )
    assert (code, err) == (0, "")
    [rep] = printed(out)["rep"]
    assert printed(out)["linked"] == [f"{BANON}: nextedition {rep}"]
    # A line-level edit: every line a person wrote, the comment first, is still there.
    assert old_sidecar.read_text() == old_text + f"nextedition: {rep}\n"
    got = answer(settings, BANON, verblist="GetLastEdition")
    assert got["ibi.nextedition"] == f"{{rep {rep}}}"
    assert got["url.lastedition"] == f"http://{ADDRESS}/col/{rep}/doc/relat%C3%B3rio.pdf"
    assert "ibi.nextedition" not in answer(settings, rep, verblist="GetLastEdition")
    check(capsys, collection)


def test_translation_of_is_recorded_on_both_sides(capsys, settings, collection, files):
    code, out, err = run(
        capsys,
        *deposit_args(
            settings,
            files["data"],
            "--language",
            "pt-BR",
            "--translation-of",
            "8jmkd3mgp8w/35mmll8",
        ),
    )
    assert (code, err) == (0, "")
    [rep] = printed(out)["rep"]
    assert printed(out)["linked"] == [
        f"{OAIS_2002}: translations pt-BR: {rep}",
        f"{rep}: translations en: {OAIS_2002}",
    ]
    assert yaml.safe_load((collection / rep / "item.yaml").read_text())["translations"] == {
        "en": OAIS_2002
    }  # written in the form the item is filed under
    old = answer(settings, OAIS_2002, verblist="GetTranslation(pt-BR)")
    assert old["ibi.translation(pt-BR)"] == f"{{rep {rep}}}"
    assert old["url.translation(pt-BR)"] == f"http://{ADDRESS}/col/{rep}/doc/dados.csv"
    new = answer(settings, rep, verblist="GetTranslation(en)")
    assert new["ibi.translation(en)"] == f"{{rep {OAIS_2002}}}"
    assert (
        new["url.translation(en)"] == f"http://{ADDRESS}/col/{OAIS_2002}/doc/CCSDS%20650.0-B-1.pdf"
    )
    check(capsys, collection)


def test_translation_of_an_item_without_language_says_the_reverse_entry_is_missing(
    capsys, settings, collection, files
):
    metadata = "sid.inpe.br/mtc-m18/2012/07.12.18.08.49"  # contenttype Metadata, no language
    code, out, err = run(
        capsys,
        *deposit_args(settings, files["data"], "--language", "fr", "--translation-of", metadata),
    )
    assert code == 0
    [rep] = printed(out)["rep"]
    assert f"{metadata} has no language" in err and "translations" in err
    assert yaml.safe_load((collection / metadata / "item.yaml").read_text())["translations"] == {
        "fr": rep
    }
    assert "translations" not in yaml.safe_load((collection / rep / "item.yaml").read_text())
    check(capsys, collection)


def test_a_related_item_without_a_sidecar_gets_one(capsys, settings, collection, files):
    plain = collection / "a.example/x/2020/01.01.00.00"
    (plain / "doc").mkdir(parents=True)
    (plain / "doc" / "f.txt").write_text("f")
    code, out, _ = run(
        capsys,
        *deposit_args(settings, files["data"], "--nextedition-of", "A.EXAMPLE/x/2020/01.01.00.00"),
    )
    assert code == 0
    [rep] = printed(out)["rep"]
    assert (plain / "item.yaml").read_text() == f"nextedition: {rep}\n"
    assert (
        answer(settings, "a.example/x/2020/01.01.00.00", verblist="GetLastEdition")[
            "ibi.nextedition"
        ]
        == f"{{rep {rep}}}"
    )
    check(capsys, collection)


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["--nextedition-of", "unknown.example/x/2020/01.01.00.00"],
            "--nextedition-of unknown.example/x/2020/01.01.00.00: no item of this collection",
        ),
        (
            ["--nextedition-of", OAIS_2002],
            "already has a next edition, sid.inpe.br/mtc-m18/2012/"
            "07.12.18.08; the last edition held here is sid.inpe.br/mtc-m18/2012/07.12.18.08",
        ),
        (["--nextedition-of", "iconet.com.br/banon/2010/01.20.11.05"], "is Deleted"),
        (
            ["--nextedition-of", "sid.inpe.br/x/13/01.01.00.00"],
            "year '13' must be 4 or more digits",
        ),
        (["--translation-of", OAIS_2002], "--translation-of needs --language"),
        (
            ["--translation-of", "sid.inpe.br/mtc-m18@80/2009/07.21.13.23", "--language", "pt"],
            "already has a pt translation, sid.inpe.br/mtc-m18@80/2009/08.25.19.43",
        ),
        (["--translation-of", OAIS_2002, "--language", "EN"], "that item is in en too"),
        (
            ["--translation-of", "8JMKD3MGP8W/22222", "--language", "fr"],
            "no item of this collection",
        ),
        (["--target", "missing.pdf"], "--target 'missing.pdf' is not one of the files deposited"),
        (["--language", "portuguese"], "--language: 'portuguese' is not lang[-CC]"),
        (["--title", "  "], "--title is empty"),
        (["/nonexistent/file.pdf"], "/nonexistent/file.pdf: not a regular file"),
    ],
)
def test_refusals_change_nothing(capsys, settings, collection, files, extra, message):
    before = snapshot(collection)
    code, out, err = run(capsys, *deposit_args(settings, files["data"], *extra))
    assert code == 1 and out == ""
    assert err.startswith("archive-service deposit: ") and message in err, err
    assert snapshot(collection) == before
    assert not (Path(settings["state_dir"]) / "mint-last-date").exists()  # nothing minted


def test_two_files_of_one_name_are_refused(capsys, settings, tmp_path, files):
    other = tmp_path / "other" / "dados.csv"
    other.parent.mkdir()
    other.write_text("x")
    code, _, err = run(capsys, *deposit_args(settings, files["data"], other))
    assert code == 1 and "two files are named 'dados.csv'" in err


@pytest.mark.parametrize("name", ["new\nline.pdf", "back\\slash.pdf"])
def test_a_file_name_never_served_is_refused(capsys, settings, collection, tmp_path, name):
    """Deposited, its item's one file got no URL (a backslash: no url pair at all) and
    `check` reported the new item."""
    upload = tmp_path / name
    upload.write_text("x")
    before = snapshot(collection)
    code, _, err = run(capsys, *deposit_args(settings, upload))
    assert code == 1 and "a control character or a backslash" in err, err
    assert snapshot(collection) == before


def test_a_symbolic_link_is_refused_not_followed(capsys, settings, collection, tmp_path):
    """A depositor's upload keeps its links (rsync -a, sftp): deposited as given, a link to
    the state directory's urlkey.secret put the secret in a public item's doc/."""
    secret = Path(settings["state_dir"]) / "urlkey.secret"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_bytes(b"the Archive's secret")
    upload = tmp_path / "upload" / "thesis.pdf"
    upload.parent.mkdir()
    upload.symlink_to(secret)
    before = snapshot(collection)
    code, _, err = run(capsys, *deposit_args(settings, upload))
    assert code == 1 and f"{upload}: a symbolic link (to {secret})" in err, err
    assert snapshot(collection) == before


def _config(settings: dict) -> dict:
    return dict(settings, archiveip=IP)


T = 1700000040  # 2023-11-14T22:14:00Z, a whole minute: the first label is the minute's


def test_an_existing_directory_in_the_way_is_refused(settings, collection, files, tmp_path):
    """os.rename would silently replace an empty directory; deposit must not. (An empty
    directory named by an IBIp is no item, so only this check stands in the way.)"""
    config = dict(_config(settings), archiveaddress="localhost:8080")  # IBIp only
    way = collection / ibip.encode(IP, 8080, T)
    way.mkdir(parents=True)
    before = snapshot(collection)
    with pytest.raises(deposit.DepositError, match=f"{way} already exists; nothing changed"):
        deposit.deposit(config, [files["data"]], now=lambda: T, sleep=lambda s: None)
    assert snapshot(collection) == before
    # An empty directory named by a repository name is an item (SPEC §7): already held.
    (collection / "sid.inpe.br/mtc-m16c/2023/11.14.22.14").mkdir(parents=True)
    fresh = dict(_config(settings), state_dir=str(tmp_path / "fresh-state"))
    with pytest.raises(deposit.DepositError, match="is already held by"):
        deposit.deposit(fresh, [files["data"]], now=lambda: T, sleep=lambda s: None)


def test_a_label_already_held_is_refused_when_the_state_was_lost(settings, collection, files):
    first = deposit.deposit(_config(settings), [files["data"]], now=lambda: T, sleep=lambda s: None)
    assert first.primary == "sid.inpe.br/mtc-m16c/2023/11.14.22.14"
    (Path(settings["state_dir"]) / "mint-last-date").unlink()  # the distributor forgets
    before = snapshot(collection)
    with pytest.raises(deposit.DepositError, match=f"{first.primary} is already held by"):
        deposit.deposit(_config(settings), [files["report"]], now=lambda: T, sleep=lambda s: None)
    assert snapshot(collection) == before


@pytest.mark.process
def test_a_deposit_killed_before_the_rename_leaves_nothing_visible(
    capsys, settings, collection, files
):
    """SIGKILL between building the item and renaming it: the index sees what it saw before."""
    before_dirs = set(index.scan(collection).by_directory)
    old_sidecar = (collection / BANON / "item.yaml").read_bytes()
    script = textwrap.dedent(f"""
        import os, signal
        from archive_service import deposit
        deposit.deposit({_config(settings)!r}, [{str(files["data"])!r}],
                        nextedition_of="LK47B6W/362SFKH",
                        before_rename=lambda temp: os.kill(os.getpid(), signal.SIGKILL))
        """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, timeout=30)
    assert done.returncode == -signal.SIGKILL, done.stderr
    [temp] = [p for p in collection.iterdir() if p.name.startswith(".deposit-")]
    assert (temp / "doc" / "dados.csv").is_file()  # built whole, never renamed
    label = yaml.safe_load((temp / "item.yaml").read_text())["ibip"]
    assert set(index.scan(collection).by_directory) == before_dirs
    assert (collection / BANON / "item.yaml").read_bytes() == old_sidecar  # only staged
    assert answer(settings, label) == {}
    check(capsys, collection)


def test_a_deposit_failing_before_the_rename_cleans_up(settings, collection, files):
    before = snapshot(collection)

    def disk_full(temp: Path) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(deposit.DepositError, match="No space left.*; nothing changed"):
        deposit.deposit(
            _config(settings),
            [files["data"]],
            nextedition_of=BANON,
            translation_of=OAIS_2002,
            language="fr",
            before_rename=disk_full,
        )
    assert snapshot(collection) == before  # no .deposit-*, no staged .item.yaml.*.tmp


def test_a_full_collection_is_a_one_line_refusal(capsys, settings, tmp_path, small_disk):
    """The collection on a 2 MB tmpfs, a 3 MB file: the command printed a traceback."""
    disk = small_disk("2m")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(3_000_000))
    code, out, err = run(capsys, *deposit_args(dict(settings, collection=str(disk)), big))
    assert code == 1 and out == "", err
    assert err.startswith("archive-service deposit: cannot build the item: ")
    assert "No space left on device" in err and err.rstrip().endswith("nothing changed")
    assert os.listdir(disk) == []  # the half-built .deposit-* is gone


@pytest.mark.process
def test_a_deposit_waits_while_another_is_between_reading_and_writing_a_sidecar(
    settings, collection, files, tmp_path
):
    """Process A has read OAIS_2002's sidecar and staged its new text, and pauses before its
    rename; B, adding another translation to the same item, must wait for A (the deposit
    lock) or A's commit would drop B's entry."""
    ready = tmp_path / "a-is-paused"
    script = textwrap.dedent(f"""
        import pathlib, time
        from archive_service import deposit
        def pause(temp):
            pathlib.Path({str(ready)!r}).touch()
            time.sleep(0.6)
        done = deposit.deposit({_config(settings)!r}, [{str(files["data"])!r}], language="fr",
                               translation_of={OAIS_2002!r}, before_rename=pause)
        print(done.primary)
        """)
    a = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(300):
            if ready.exists() or a.poll() is not None:
                break
            time.sleep(0.01)
        assert ready.exists(), a.communicate()
        b = deposit.deposit(
            _config(settings), [files["report"]], language="de", translation_of=OAIS_2002
        )
        out, err = a.communicate(timeout=30)
    finally:
        a.kill()
    assert a.returncode == 0, err
    translations = yaml.safe_load((collection / OAIS_2002 / "item.yaml").read_text())[
        "translations"
    ]
    assert translations == {"fr": out.strip(), "de": b.primary}


# ---------------------------------------------------------------------- sidecar update


def test_line_level_update_keeps_every_other_line(tmp_path):
    path = tmp_path / "item.yaml"
    original = textwrap.dedent("""\
        # Head comment.
        language: en   # inline comment
        translations:
          # the Portuguese one
          pt: a.b/c/2009/08.25.19.43

        # a comment before target
        target: "x.pdf"
        dc:
          title: >-
            A folded
            title
        """)
    path.write_text(original)
    os.chmod(path, 0o640)
    update = sidecar_update.apply(
        path,
        {
            "translations": {"pt": "a.b/c/2009/08.25.19.43", "fr": "a.b/c/2010/01.01.00.00"},
            "nextedition": "a.b/c/2011/01.01.00.00",
        },
    )
    assert update.comments_kept
    text = path.read_text()
    assert (
        text
        == original.replace(
            "translations:\n  # the Portuguese one\n  pt: a.b/c/2009/08.25.19.43\n",
            "translations:\n  pt: a.b/c/2009/08.25.19.43\n  fr: a.b/c/2010/01.01.00.00\n",
        )
        + "nextedition: a.b/c/2011/01.01.00.00\n"
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["item.yaml"]  # no temporary left


def test_a_layout_that_cannot_be_edited_line_by_line_is_rewritten_and_says_so(tmp_path):
    path = tmp_path / "item.yaml"
    path.write_text("# Head comment.\n{language: en, target: x.pdf}  # inline\n")
    update = sidecar_update.apply(path, {"state": "Deleted"})
    assert not update.comments_kept
    assert path.read_text().startswith("# Head comment.\n")
    assert yaml.safe_load(path.read_text()) == {
        "language": "en",
        "target": "x.pdf",
        "state": "Deleted",
    }


def test_deposit_reports_a_sidecar_rewritten_without_its_comments(
    capsys, settings, collection, files
):
    path = collection / BANON / "item.yaml"
    path.write_text(
        '# Banon.\n{ibip: LK47B6W/362SFKH, language: pt, target: "@relatorio.pdf"}  # flow style\n'
    )
    code, out, err = run(capsys, *deposit_args(settings, files["data"], "--nextedition-of", BANON))
    assert code == 0
    assert "rewritten by PyYAML" in err
    [rep] = printed(out)["rep"]
    assert path.read_text().startswith("# Banon.\n")
    assert answer(settings, BANON, verblist="GetLastEdition")["ibi.nextedition"] == f"{{rep {rep}}}"
    check(capsys, collection)


def test_an_unusable_related_sidecar_is_refused(tmp_path):
    path = tmp_path / "item.yaml"
    path.write_text("state: Gone\n")
    with pytest.raises(sidecar.SidecarError, match="state: 'Gone' is not one of"):
        sidecar_update.prepare(path, {"nextedition": "a.b/c/2011/01.01.00.00"})
    with pytest.raises(sidecar.SidecarError, match="nextedition"):
        sidecar_update.prepare(tmp_path / "new.yaml", {"nextedition": "not an ibi"})


# ------------------------------------------------------------------------------ delete


def deleted_answer(settings: dict, ibi: str) -> list[tuple[str, str]]:
    return pairs.parse(Client(create_app(settings), "").url_request(ibi).text)


def test_delete_keeps_a_tombstone_and_the_files(capsys, settings, collection):
    item = collection / BANON
    files_before = {p.name: p.read_bytes() for p in (item / "doc").iterdir()}
    client = Client(create_app(settings), "")
    old_url = dict(pairs.parse(client.url_request(BANON).text))["url"]
    client.get_url(old_url, status=200)

    code, out, err = run(
        capsys,
        "delete",
        "--collection",
        collection,
        "--state-dir",
        settings["state_dir"],
        "LK47B6W/362SFKH",
    )
    assert (code, err) == (0, "")
    side = sidecar.read(item / "item.yaml")
    assert side.state == "Deleted"
    stamp = side.timestamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"now says state Deleted, timestamp {stamp}" in out
    [kept] = [p for p in item.iterdir() if p.name.startswith(".deleted-doc-")]
    assert f"kept 3 file(s): doc/ moved to {kept}" in out
    assert {p.name: p.read_bytes() for p in kept.iterdir()} == files_before
    assert not (item / "doc").exists()
    text = (item / "item.yaml").read_text()
    assert text.startswith('# Banon, "IBI: sistema de identificação"')  # comments kept
    assert "Timestamp before: 2009-09-09T22:01:00Z; state before: Original." in text

    assert deleted_answer(settings, BANON) == [
        ("archiveaddress", ADDRESS),
        ("ibi", f"{{rep {BANON} ibip LK47B6W/362SFKH}}"),
        ("ibi.archiveservice", "{rep sid.inpe.br/mtc-m18@80/2008/03.17.15.17}"),
        ("ibi.platformsoftware", "{rep dpi.inpe.br/banon/1998/08.02.08.56}"),
        ("state", "Deleted"),
        ("timestamp", stamp),
    ]
    client = Client(create_app(settings), "")
    client.get_url(old_url, status=404)
    client.get(f"/col/{BANON}/{kept.name}/leiame.txt", status=404)
    check(capsys, collection)

    code, _, err = run(
        capsys, "delete", "--collection", collection, "--state-dir", settings["state_dir"], BANON
    )
    assert code == 1 and f"is already Deleted (since {stamp})" in err


def test_delete_refuses_what_is_not_held(capsys, settings, collection):
    before = snapshot(collection)
    for label, message in (
        ("unknown.example/x/2020/01.01.00.00", "no item of this collection"),
        ("sid.inpe.br/x/13/01.01.00.00", "year '13'"),
    ):
        code, out, err = run(
            capsys,
            "delete",
            "--collection",
            collection,
            "--state-dir",
            settings["state_dir"],
            label,
        )
        assert code == 1 and out == "" and message in err
    assert snapshot(collection) == before


def test_delete_a_metadata_item_still_checks_and_names_who_refers_to_it(
    capsys, settings, collection
):
    metadata = "sid.inpe.br/mtc-m18/2012/07.12.18.08.49"  # formats: {oai_dc: oai_dc.xml}
    code, out, err = run(
        capsys, "delete", "--collection", collection, "--state-dir", settings["state_dir"], metadata
    )
    assert code == 0
    assert "note: still named by sid.inpe.br/mtc-m18/2012/07.12.18.08 (metadata)" in err
    check(capsys, collection)


def test_deposit_then_delete(capsys, settings, collection, files):
    code, out, _ = run(capsys, *deposit_args(settings, files["data"]))
    [rep], [label] = printed(out)["rep"], printed(out)["ibip"]
    code, out, _ = run(
        capsys, "delete", "--collection", collection, "--state-dir", settings["state_dir"], label
    )
    assert code == 0
    got = dict(deleted_answer(settings, rep))
    assert got["ibi"] == f"{{rep {rep} ibip {label}}}" and got["state"] == "Deleted"
    assert "url" not in got
    check(capsys, collection)


def test_a_deleted_items_files_are_not_served_even_if_left_in_doc(settings, collection):
    item = "iconet.com.br/banon/2011/06.14.16.40"
    Client(create_app(settings), "").get(f"/col/{item}/doc/dados.csv", status=200)
    with open(collection / item / "item.yaml", "a") as side:
        side.write("state: Deleted\n")  # a tombstone made by hand, doc/ left in place
    Client(create_app(settings), "").get(f"/col/{item}/doc/dados.csv", status=404)
