"""kdsl.digests.sha256 (cache keys, checksums) is SHA-256: the digests of hashlib's."""

import hashlib

from kdsl.digests import sha256


def test_digests_are_hashlibs():
    for data in (b"", b"kdsl", bytes(range(256)) * 41):
        assert sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
        assert sha256(data).digest() == hashlib.sha256(data).digest()
    h = sha256()
    h.update(b"kd")
    h.update(b"sl")
    assert h.hexdigest() == hashlib.sha256(b"kdsl").hexdigest()
    assert sha256().digest_size == 32
