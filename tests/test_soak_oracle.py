"""bench/soak.py's judge, on made-up observations: it must catch what it claims to catch.
(The soak itself runs outside the suite: python3 bench/soak.py.)"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from support import ROOT

spec = importlib.util.spec_from_file_location("soak", ROOT / "bench" / "soak.py")
soak = importlib.util.module_from_spec(spec)
sys.modules["soak"] = soak  # dataclasses look their module up
spec.loader.exec_module(soak)

ADDRESS = "127.0.0.1:1"
IBI = soak.slot_dir(3)
URL = f"http://{ADDRESS}/col/{IBI}/doc/file.txt"


@pytest.fixture
def timelines(tmp_path: Path):
    """Slot 3: added at t=10 (hash a, Copy), edited at 20 (hash b), deleted at 30."""
    journal = tmp_path / "churn.jsonl"
    journal.write_text(
        "".join(
            json.dumps(e) + "\n"
            for e in [
                {
                    "t0": 10,
                    "t1": 10.1,
                    "slot": 3,
                    "what": "add",
                    "value": json.dumps(["a", "Copy"]),
                },
                {"t0": 20, "t1": 20.1, "slot": 3, "what": "content", "value": "b"},
                {"t0": 30, "t1": 30.1, "slot": 3, "what": "delete", "value": None},
            ]
        )
    )
    return soak.read_journal(str(journal))


def answer(state: str | None = "Copy", url: str | None = URL) -> str:
    pairs = [("archiveaddress", ADDRESS), ("ibi", f"{{rep {IBI}}}")]
    if state:
        pairs.append(("state", state))
    if url:
        pairs += [("url", url), ("urlkey", "1234567890123456-12345678901234567890")]
    return soak.pairs.render(pairs)


def url_request(body: str, t: float, status: int = 200) -> dict:
    return {
        "kind": "urlRequest",
        "slot": 3,
        "ibi": IBI,
        "verbs": "",
        "status": status,
        "body": body,
        "t0": t,
        "t1": t + 0.01,
    }


def download(
    digest: str, t: float, status: int = 200, size: int = 5, length: int | None = 5
) -> dict:
    return {
        "kind": "download",
        "slot": 3,
        "path": f"/col/{IBI}/doc/file.txt",
        "status": status,
        "sha256": digest,
        "size": size,
        "length": length,
        "t0": t,
        "t1": t + 0.01,
    }


def judge(timelines, *observations):
    tally, problems, _ = soak.check(list(observations), timelines, {}, {}, ADDRESS)
    return {k: tally[k] for k in ("5xx", "malformed", "inconsistent")}, problems


CLEAN = {"5xx": 0, "malformed": 0, "inconsistent": 0}


def test_answers_matching_some_past_state_pass(timelines):
    assert (
        judge(
            timelines,
            url_request("", 5),
            url_request("", 40),  # absent before and after
            url_request(answer(), 15),
            url_request(answer(), 35),  # stale index: fine
            download("a", 12),
            download("a", 25),
            download("b", 25),
            download("", 5, status=404),
        )[0]
        == CLEAN
    )


@pytest.mark.parametrize(
    "observation, kind",
    [
        (url_request(answer(), 5), "inconsistent"),  # answered for an item not yet added
        (url_request(answer(state="Original"), 15), "inconsistent"),  # a state it never had
        (url_request(answer(url=URL.replace("file", "other")), 15), "inconsistent"),
        (url_request(answer(url=None) + "\r\nurlkey 1234567890-1234567890", 15), "inconsistent"),
        (url_request("ibi  {", 15), "malformed"),
        (url_request("url x\nibi y", 15), "malformed"),  # LF, not CRLF
        (url_request("", 15, status=500), "5xx"),
        (download("c", 25), "inconsistent"),  # bytes of no version ever written
        (download("b", 15), "inconsistent"),  # a version written after the answer
        (download("a", 25, size=5, length=9), "malformed"),  # short of its Content-Length
    ],
)
def test_each_kind_of_wrong_answer_is_caught(timelines, observation, kind):
    counts, problems = judge(timelines, observation)
    assert counts[kind] == 1 and problems, (counts, problems)
