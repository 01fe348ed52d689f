"""Property tests of the protocol's parsers and codecs (generated input), with the inputs that
once broke them as explicit examples: each parser raises only its declared error, and every
round trip keeps the meaning (SPEC §2-§4, §6)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from archive_service import cli
from archive_service.protocol import ibi, ibip

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
