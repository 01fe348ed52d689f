"""Property tests of the protocol's parsers and codecs (generated input), with the inputs that
once broke them as explicit examples: each parser raises only its declared error, and every
round trip keeps the meaning (SPEC §2-§4, §6)."""

from __future__ import annotations

import time

from hypothesis import example, given, settings
from hypothesis import strategies as st

from archive_service import cli
from archive_service.protocol import ibi, ibip, pairs, requests
from archive_service.protocol.verbs import parse_verblist
from archive_service.resolver import purl, resolve

FAST = settings(max_examples=400, deadline=None)

# ----------------------------------------------------------------------------- IBIp codec

_IBIP_CHARS = ibi.IBIP_ALPHABET + ibi.IBIP_ALPHABET.lower()
_IBIP_WORD = st.one_of(
    st.text(st.sampled_from(_IBIP_CHARS), min_size=1, max_size=24),
    # Longer than Python's 4,300-digit limit on int <-> str conversions.
    st.integers(3000, 6000).map(lambda n: "3" * n),
    st.integers(3000, 6000).map(lambda n: "3EPGUE5W" + "3" * n),
)


@FAST
@given(prefix=_IBIP_WORD, suffix=_IBIP_WORD)
@example(prefix="3" * 5000 + "W", suffix="3")  # int() refused 5,000 digits: ValueError
@example(prefix="8JMKD3MGP7W", suffix="3" * 5000)
@example(prefix="8JMKD3MGP7W", suffix="3EPGUE5W" + "3" * 3200)  # str() of the fraction
@example(prefix="TDFKBX", suffix="3" * 3006)  # str() of the seconds, in the error message
def test_decode_refuses_only_with_ibierror_and_is_encodes_inverse(prefix, suffix):
    label = f"{prefix}/{suffix}"
    try:
        decoded = ibip.decode(label)
    except ibi.IbiError:
        return
    assert ibip.encode(decoded.ip, decoded.port, decoded.timestamp) == label.upper()


def test_ibi_decode_and_check_of_a_huge_ibip_say_why_without_a_traceback(capsys):
    label = "3" * 5000 + "W/3"
    assert cli.main(["ibi", "decode", label]) != 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "too long" in err
    assert cli.main(["ibi", "check", label]) == 0
    out, err = capsys.readouterr()
    assert out == "ibip\n" and "too long" in err


# ---------------------------------------------------------------------- persistent URLs

_IBIS = ["iconet.com.br/banon/2009/09.09.22.01", "LK47B6W/362SFKH", "lk47b6w/362sfkh"]
_MODIFIER = st.lists(
    st.sampled_from(["!", "+", "+(pt)", "+(pt-BR)", ":", ":(oai_dc)", "+(x)", ":(y)", "+(", "("]),
    max_size=4,
).map("".join)
_PATH = st.lists(
    st.lists(st.sampled_from(list("ab.%\\\x00 +&=?é") + ["..", "%2e", "\udcff"]), max_size=6).map(
        "".join
    ),
    max_size=3,
)
_VERBS = st.lists(
    st.sampled_from(
        ["GetLastEdition", "GetTranslation", "GetTranslation(pt)", "GetMetadata"]
        + ["GetMetadata(oai_dc)", "GetFileList", "Bad"]
    ),
    max_size=4,
)
_SEPARATOR = st.sampled_from(["+", "%20", "%2B", "++", "%09", "%0A", "+%09"])
_OTHERS = st.lists(
    st.sampled_from(
        ["a=1", "ibiurl.requireditemstatus=Original", "%69biurl.verblist=GetFileList"]
        + ["ibiurl.x=1", "&&", "=", "a", "ibiurl.requireditemstatus=copy"]
    ),
    max_size=2,
)


@FAST
@given(ibi_=st.sampled_from(_IBIS), mdf=_MODIFIER, path=_PATH, verbs=_VERBS, others=_OTHERS)
def test_a_parsed_persistent_url_is_a_urlrequest_the_archive_accepts(
    ibi_, mdf, path, verbs, others
):
    full = ibi_ + mdf + "".join("/" + segment for segment in path)
    query = "&".join(others + ([f"ibiurl.verblist={'+'.join(verbs)}"] if verbs else []))
    try:
        parsed = purl.parse(full, query)
    except purl.PurlError:
        return
    assert ibi.key(parsed.ibi) == ibi.key(ibi_)
    question = resolve.Question(parsed.ibi, parsed.parsed.relation, parsed.parsed.filelist)
    request = requests.parse_url_request(question.params("150.163.2.175", parsed.filepath))
    assert request.verbs == parsed.parsed
    assert parse_verblist(parsed.verblist) == parsed.parsed


@FAST
@given(mdf=_MODIFIER, verbs=_VERBS, separators=st.lists(_SEPARATOR, min_size=4, max_size=4))
@example(mdf="!", verbs=["GetLastEdition", "GetLastEdition"], separators=["%09"] * 4)
@example(mdf="", verbs=["GetMetadata", "GetMetadata"], separators=["%0A"] * 4)
def test_verbs_mean_the_same_whatever_blanks_or_pluses_join_them(mdf, verbs, separators):
    """Table 6.4 joins verbs with '+', Example 8.2 with blanks; the Archive takes any run of
    white space or '+' (verbs.parse_verblist): so does the persistent URL, duplicates
    included."""

    def parse(joined: str):
        try:
            return purl.parse("LK47B6W/362SFKH" + mdf, "ibiurl.verblist=" + joined).verbs
        except purl.PurlError as exc:
            return str(exc).replace("\t", " ").replace("\n", " ")

    spelled = "".join(v + s for v, s in zip(verbs, separators))
    assert parse(spelled) == parse("+".join(verbs))


def _seconds(work) -> float:
    """The best of three runs of `work()`, in seconds."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def _refused(path: str, query: str) -> None:
    try:
        purl.parse(path, query)
    except purl.PurlError:
        return
    raise AssertionError("a verb list of unknown verbs was taken")


def test_a_long_verb_list_takes_time_linear_in_its_length():
    """`verb not in verbs` over a list made the union quadratic: 50,000 distinct unknown
    verbs (340 KB, under a WSGI server without gunicorn's request-line limit) took 8 s."""
    small, large = (
        "ibiurl.verblist=" + "+".join(f"V{i}" for i in range(n)) for n in (4_000, 40_000)
    )
    ratio = _seconds(lambda: _refused("LK47B6W/362SFKH", large)) / _seconds(
        lambda: _refused("LK47B6W/362SFKH", small)
    )
    assert ratio < 30, f"10 times the verbs took {ratio:.0f} times as long"


# ------------------------------------------------------------------------ IBIs and pairs

_IBI_SEGMENT = st.one_of(
    st.text(st.sampled_from(list("aZ09-.@:+!_ \t\x00é٣WX3")), max_size=10),
    st.sampled_from(
        ["sid.inpe.br", "mtc-m18@80", "2013", "09.04.12.27.57", "02.29.00.00", "8JMKD3MGP7W"]
    ),
)


@FAST
@given(text=st.lists(_IBI_SEGMENT, min_size=1, max_size=6).map("/".join))
def test_ibi_parse_refuses_only_with_ibierror_and_ignores_case(text):
    try:
        parsed = ibi.parse(text)
    except ibi.IbiError:
        return
    assert text.isascii()
    for spelling in (text.upper(), text.lower()):
        assert ibi.parse(spelling).kind == parsed.kind
        assert ibi.key(spelling) == parsed.key


_WORD = st.text(st.sampled_from([chr(c) for c in range(0x21, 0x7B)] + ["|", "~"]), min_size=1)
_VALUE = st.one_of(_WORD, st.lists(_WORD, max_size=4).map(pairs.value_list))


@FAST
@given(listed=st.dictionaries(_WORD, _VALUE, max_size=6))
def test_rendered_pairs_parse_back_as_the_same_pairs(listed):
    body = pairs.render(listed.items())
    assert pairs.parse(body) == sorted(listed.items())


@FAST
@given(body=st.text(st.sampled_from(list("ab{} \r\n\t\x00é|~%")), max_size=30))
def test_pairs_parse_refuses_only_with_pairserror(body):
    try:
        parsed = pairs.parse(body)
    except pairs.PairsError:
        return
    assert pairs.parse(pairs.render(parsed)) == sorted(parsed, key=lambda p: p[0])
