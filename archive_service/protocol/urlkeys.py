"""URL keys (`urlkey`, §7 Algorithm 2 line 19) that this Archive can check when acknowledged.

The seed says the key "may be used by the Archive, on receiving the acknowledgment, to
authorise incrementing the access statistics" and "should change on every answer". A key
here is a Table 5.1 key (`digits "-" digits`, 10+ digits each) that proves, without any
per-answer storage, that this Archive answered a given URL at a given time:

    <issued: 10 digits, POSIX seconds><nonce: 12 digits> "-" <tag: 20 digits>... <seal: 20 digits>

- The head (`issued` and `nonce`) is the key's identity: it names the one answer the key was
  issued with, and the statistics count a head at most once (stores/stats/), however the rest of
  the key is spelled. `issued` also lets a key expire (`LIFETIME`); 12 random digits make
  two answers of the same second share a head about once in 10**12 / n**2 seconds at n
  answers a second (a lost count once in 6 days at 2,000 a second).
- One tag per distinct URL of the answer: the first 20 decimal digits (about 66 bits) of
  HMAC-SHA256(secret, "urlkey/2" NUL "tag" NUL head NUL canonical URL). An answer may carry
  several URLs under one key (GetTranslation without a language gives one
  `url.translation(xx)` per language; a full MontarListaDeURL one per relation), and the
  resolver acknowledges whichever one it chose: an acknowledgment verifies when the tag of
  *its* `url` is among the key's tags. The key is computed last, over the URLs the answer
  really carries after FiltrarListaDeURL, so it vouches for no URL the answer did not give.
  Tags are sorted, so the key says nothing about which URL is which; an answer with no URL
  gets one tag of the empty URL, which no acknowledgment can present (`url` is required).
- The seal: 20 digits of HMAC-SHA256(secret, "urlkey/2" NUL "seal" NUL head NUL tags), so a
  key carries exactly the tags it was issued with. A tag appended, doubled, removed or moved
  from another key breaks the seal, and the key is refused as forged before its tags are
  looked at. (Keys of the format before the seal, "urlkey/1", are refused likewise: they
  lived for the few seconds between an answer and its acknowledgment at the upgrade.)
- Canonical URL: the bytes of the URL with `+` read as a space and every `%xx` decoded,
  scheme and host in lower case and http's `:80` left out (RFC 3986 §6.2.2-3). The
  seed's own resolver sends `url=…/Relat%f3rio%20Final.pdf` unescaped inside the query (so
  the query decoding already turned `%f3` into a byte), a careful one sends it escaped
  (`%25f3`); both give the same canonical bytes as the answer's `Relat%f3rio%20Final.pdf`.
  The item a verified URL is counted under is read from the same canonical bytes
  (answers.Archive.item_of_url), so every spelling that verifies names the same item.
- The secret (32 random bytes; kept by stores/urlkeys/, never read here) lives in
  `<state_dir>/urlkey.secret`, mode 0600, created once
  atomically (written to a private temporary file, then hard-linked into place, which fails
  if another process got there first; everyone then reads the one file back). Every worker
  and every restart shares it, so any worker can check any key. If the state directory cannot
  hold it, the service logs an error and signs with a per-process secret: answers continue,
  and acknowledgments verify until the next restart.
- With the `database` setting (several nodes) the secret lives in PostgreSQL instead
  (`urlkey_secret`, one row): each node offers a random one with INSERT … ON CONFLICT DO
  NOTHING and reads back the one that won, so a key any node issued verifies on every node.

A key proves the URL came from this Archive; counting its head once (replays, respellings) is
the statistics store's job (stores/stats/). Anyone may send a urlRequest, so a key is not proof
that a person followed the link: it bounds the counts to one per answer this Archive gave.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

SECRET_BYTES = 32
ISSUED_DIGITS = 10
NONCE_DIGITS = 12
TAG_DIGITS = 20  # also the seal's
_MODULUS = 10**TAG_DIGITS
_TAG_FORMAT = f"%0{TAG_DIGITS}d"
_HEAD_FORMAT = f"%0{ISSUED_DIGITS}d%0{NONCE_DIGITS}d"
_BLOCK = 64  # SHA-256's block size, HMAC's key length
# Seconds a key stays acknowledgeable. The seed's resolver acknowledges before it even sends
# the user on (§6.2, messages 5 then 7), so within seconds; an hour is room for slow ones and
# bounds what the statistics must remember per key to one hour of answers (stores/stats/).
LIFETIME = 3600
CLOCK_SKEW = 300  # seconds a key may seem to come from the future (clock steps between hosts)
_TAG_DOMAIN = b"urlkey/2\0tag\0"
_SEAL_DOMAIN = b"urlkey/2\0seal\0"
# head "-" one or more tags, then the seal
_KEY_RE = re.compile(
    rf"([0-9]{{{ISSUED_DIGITS}}})([0-9]{{{NONCE_DIGITS}}})-"
    rf"((?:[0-9]{{{TAG_DIGITS}}})+)([0-9]{{{TAG_DIGITS}}})"
)


@dataclass(frozen=True)
class Verdict:
    """What a key says about an acknowledged URL: `ok`, or `reason` it is refused."""

    ok: bool
    reason: str  # 'valid', 'malformed', 'expired', 'future' or 'forged'
    issued: int = 0
    nonce: int = 0  # with `issued`, the key's identity (the answer it was issued with)


_SCHEME_AND_HOST = re.compile(rb"([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)")


def canonical_url(url: str) -> bytes:
    """The bytes every spelling of one URL shares (see the module's docstring)."""
    canon = unquote_to_bytes(url.encode("utf-8", "surrogateescape").replace(b"+", b" "))
    match = _SCHEME_AND_HOST.match(canon)
    if match:  # RFC 3986 §6.2.2-3: scheme and host in any case, http's port 80 implied
        scheme, host = match.group(1).lower(), match.group(2).lower()
        if scheme == b"http" and host.endswith(b":80"):
            host = host[:-3]
        canon = scheme + b"://" + host + canon[match.end() :]
    return canon


class UrlKeys:
    """Issues and checks URL keys with one secret."""

    def __init__(
        self, secret: bytes, clock: Callable[[], float] = time.time, lifetime: int = LIFETIME
    ):
        if len(secret) < 16:
            raise ValueError("a URL-key secret needs 16 bytes or more")
        self._secret = secret
        # HMAC-SHA256 (RFC 2104) from SHA-256 states with the padded key, and each domain,
        # already absorbed, copied per use: a one-shot hmac.digest keys SHA-256 afresh every
        # time (twice the cost), and hmac.HMAC's copy and digest wrap OpenSSL's HMAC in
        # Python calls (an answer's key: 9 us with them, 6 us with hashlib's states).
        # tests/test_urlkey_format.py and test_urlkey_issue_secrets.py hold the output to
        # hmac.digest.
        block = secret if len(secret) <= _BLOCK else hashlib.sha256(secret).digest()
        block = block.ljust(_BLOCK, b"\0")
        inner = hashlib.sha256(bytes(b ^ 0x36 for b in block))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in block))
        self._tag_inner, self._seal_inner = inner.copy(), inner
        self._tag_inner.update(_TAG_DOMAIN)
        self._seal_inner.update(_SEAL_DOMAIN)
        self._clock = clock
        self.lifetime = lifetime
        # None, or one line saying why keys will not verify after a restart (for a health check).
        self.problem: str | None = None

    @classmethod
    def ephemeral(cls) -> UrlKeys:
        """Keys only this process (and its forks) can check: for tools and tests."""
        return cls(secrets.token_bytes(SECRET_BYTES))

    def derive(self, purpose: str) -> bytes:
        """A key of its own for another use of this secret (OAI-PMH's resumption tokens): an
        HMAC of the purpose, never the secret, so one use cannot stand for another and every
        node sharing the secret derives the same key."""
        return hmac.digest(self._secret, b"archive-service/derive\0" + purpose.encode(), "sha256")

    def issue(self, urls: Iterable[str]) -> str:
        """A new key vouching for each of `urls` (the url pairs of one answer)."""
        return self.issue_canonical({canonical_url(u) for u in urls})

    def issue_canonical(self, canon: Iterable[bytes]) -> str:
        """`issue` for URLs already in canonical_url form."""
        head = _HEAD_FORMAT % (int(self._clock()), _nonce())
        head_bytes = head.encode()
        keyed = self._tag_inner.copy()  # _TAG_DOMAIN head NUL, then each URL
        keyed.update(head_bytes + b"\0")
        found = set()
        for c in canon or (b"",):
            mac = keyed.copy()
            mac.update(c)
            found.add(self._finish(mac))
        tags = "".join(sorted(found))
        return f"{head}-{tags}{self._seal(head, tags)}"

    def _finish(self, inner) -> str:
        """The digits of the HMAC whose inner hash is `inner` (consumed)."""
        outer = self._outer.copy()
        outer.update(inner.digest())
        return _decimal(outer.digest())

    def _seal(self, head: str, tags: str) -> str:
        seal = self._seal_inner.copy()  # from the absorbed domain
        seal.update(head.encode() + b"\0" + tags.encode())
        return self._finish(seal)

    def _tag(self, head: str, canon: bytes) -> str:
        mac = self._tag_inner.copy()
        mac.update(head.encode() + b"\0" + canon)
        return self._finish(mac)

    def verify(self, key: str, url: str) -> Verdict:
        match = _KEY_RE.fullmatch(key)
        if not match:
            return Verdict(False, "malformed")
        issued = int(match.group(1))
        now = self._clock()
        if issued > now + CLOCK_SKEW:
            return Verdict(False, "future", issued)
        if issued < now - self.lifetime:
            return Verdict(False, "expired", issued)
        head, tags, seal = match.group(1) + match.group(2), match.group(3), match.group(4)
        if not hmac.compare_digest(seal, self._seal(head, tags)):
            return Verdict(False, "forged", issued)
        mine = self._tag(head, canonical_url(url))
        found = False
        for i in range(0, len(tags), TAG_DIGITS):  # every tag compared: no early exit to time
            found |= hmac.compare_digest(tags[i : i + TAG_DIGITS], mine)
        if not found:
            return Verdict(False, "forged", issued)
        return Verdict(True, "valid", issued, int(match.group(2)))


def _decimal(mac: bytes) -> str:
    """A tag or seal: the MAC's first TAG_DIGITS decimal digits (about 66 bits)."""
    return _TAG_FORMAT % (int.from_bytes(mac, "big") % _MODULUS)


class _Nonces:
    """Unpredictable nonces from the system's CSPRNG, read 4 KB at a time (one system call
    per 512 answers instead of one per answer); a forked process starts its own pool, or
    two workers would hand out the same keys. Each pool's 512 nonces are made at once and
    handed out by a list iterator: one `next` an answer, not a slice and an offset moved."""

    def __init__(self) -> None:
        self.pool: Iterator[int] = iter(())

    def __call__(self) -> int:
        nonce = next(self.pool, None)
        if nonce is None:
            self.pool = iter(
                # bias < 1e-7
                [n % 10**NONCE_DIGITS for (n,) in struct.iter_unpack(">Q", os.urandom(4096))]
            )
            nonce = next(self.pool)
        return nonce

    def forget(self) -> None:
        self.pool = iter(())


_nonce = _Nonces()
os.register_at_fork(after_in_child=_nonce.forget)
