"""The file a `u` deletion vector descriptor names, decoded from the protocol's text alone
(PROTOCOL.md, Deletion Vector Descriptor), independently of delta-ops' own decoder, so tests
that judge which DV files exist or go do not share a bug with the code under test.

    dv_file({"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", ...})
    # -> "ab/deletion_vector_<uuid>.bin"
"""

from __future__ import annotations

import uuid

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85_decode(text: str) -> bytes:
    """Z85 text (a multiple of 5 characters) to bytes, 4 per block."""
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for ch in text[i : i + 5]:
            value = value * 85 + _Z85.index(ch)
        out += value.to_bytes(4, "big")
    return bytes(out)


def dv_file(dv: dict | None) -> str | None:
    """Relative path of a `u` deletion vector's file; None for any other descriptor."""
    if not dv or dv.get("storageType") != "u":
        return None
    text = dv["pathOrInlineDv"]
    prefix, encoded = text[:-20], text[-20:]
    name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
    return f"{prefix}/{name}" if prefix else name


__all__ = ["dv_file", "z85_decode"]
