"""File names are the bytes on disk, whatever the locale of the process that serves them.

mod_wsgi embeds Python under Debian's /etc/apache2/envvars (LANG=C) without the UTF-8 mode
or locale coercion a `python` command gets: its file-system encoding is ASCII. These run the
app in such an interpreter (PYTHONUTF8=0 PYTHONCOERCECLOCALE=0 LC_ALL=C gives a command the
same) and in a UTF-8 one, each on its own index and on the index the other wrote, and ask
for the same things: non-ASCII names (the sample's "Relatório Final.pdf"), a name that is
not UTF-8 at all, and the index both share."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from support import ROOT

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_IBI = "8JMKD3MGP7W/3EPGUE5"  # target "Relatório Final.pdf"
TARGET_DIR = "sid.inpe.br/mtc-m19/2013/09.04.12.27.57"
LATIN1 = b"caf\xe9 r\xe9sum\xe9.txt"  # not UTF-8: reaches the disk and back as these bytes

# Run in the child: the answers and pages a resolver and a browser get, as JSON.
CHILD = r"""
import json, re, sys
from urllib.parse import quote, urlsplit
import webtest
from archive_service.web import create_app
from archive_service.protocol import pairs

settings = json.loads(sys.argv[1])
app = webtest.TestApp(create_app(settings))
service = "/" + settings["archiveserviceibi"]

def answer(ibi, **extra):
    params = {"servicesubject": "urlRequest", "clientinformation.ipaddress": "192.0.2.1",
              "parsedibiurl.ibi": ibi, **{"parsedibiurl." + k: v for k, v in extra.items()}}
    text = app.get(service, params=params).text
    return {n: v for n, v in pairs.parse(text) if n != "urlkey"}

def get(url):
    response = app.get(urlsplit(url).path, expect_errors=True)
    return response.status_int, response.body.hex()

out = {"encoding": sys.getfilesystemencoding()}
target = answer(sys.argv[2])
out["target"] = target
out["target file"] = get(target["url"]) if "url" in target else None
by_path = answer(sys.argv[2], filepath="/Relat\u00f3rio Final.pdf")
out["by path"] = by_path
files = answer(sys.argv[2], verblist="GetFileList")
page = app.get(urlsplit(files["url"]).path)
out["file list"] = page.text
# The files the page lists (its layout's links, such as the skip link, are not files).
links = re.findall(r'href="([^"]+)"', page.text)
out["listed"] = {link: get(link) for link in links if "/col/" in link}
out["latin-1"] = get("http://x/col/%s/doc/%s" % (sys.argv[3], quote(bytes.fromhex(sys.argv[4]))))
print(json.dumps(out))
"""


def run(settings: dict, utf8: bool) -> dict:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), HERE]),
        "XDG_DATA_HOME": settings["state_dir"],
        # What a `python` command under LANG=C would get, and what mod_wsgi's embedded one gets.
        **({"LC_ALL": "C.UTF-8"} if utf8 else {"LC_ALL": "C", "PYTHONUTF8": "0"}),
        "PYTHONCOERCECLOCALE": "0",
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(settings), TARGET_IBI, TARGET_DIR, LATIN1.hex()],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result.pop("encoding") == ("utf-8" if utf8 else "ascii")
    return result


@pytest.mark.process
def test_names_are_bytes_whatever_the_file_system_encoding(collection, settings, tmp_path):
    (collection / TARGET_DIR / "doc" / os.fsdecode(LATIN1)).write_bytes(b"latin-1 named\n")
    disk = (collection / TARGET_DIR / "doc" / "Relatório Final.pdf").read_bytes().hex()
    runs = {}
    for name, utf8, state in (
        ("utf-8", True, "shared"),
        ("ascii on the utf-8 index", False, "shared"),
        ("ascii", False, "own"),
        ("utf-8 on the ascii index", True, "own"),
    ):
        runs[name] = run({**settings, "state_dir": str(tmp_path / state)}, utf8)
    for name, result in runs.items():
        assert result["target"]["url"].endswith("/doc/Relat%C3%B3rio%20Final.pdf"), name
        assert {"state", "contenttype", "timestamp"} <= set(result["target"]), name
        assert result["target file"] == [200, disk], name
        assert result["by path"]["url"] == result["target"]["url"], name
        assert "Relatório Final.pdf" in result["file list"], name
        assert "caf\ufffd r\ufffdsum\ufffd.txt" in result["file list"], name
        assert result["listed"] and all(s == 200 for s, _ in result["listed"].values()), name
        assert result["latin-1"] == [200, b"latin-1 named\n".hex()], name
        assert result == runs["utf-8"], name
