"""Deletion vectors: descriptors, bitmaps and the files that hold them.

A deletion vector (DV) marks rows of a data file as deleted without rewriting the file. The log
stores a small *descriptor* on the ``add``/``remove`` action; the row indexes themselves are a
64-bit roaring bitmap kept either inline in the descriptor (storage type ``'i'``, Z85 text) or in
a DV file next to the data (``'u'``: a path derived from a UUID, ``'p'``: an absolute path).

This module is the one place that knows those byte layouts:

* `z85_encode` / `z85_decode`: the Z85 text encoding used for UUIDs and inline DVs
  (decoding also the z85 crate's short last chunk, which Rust writers leave in inline DVs).
* `DeletionVectorDescriptor`: the descriptor, its ``uniqueId`` (half of the
  reconciliation key ``(path, dvId)``) and where its bitmap lives; `dv_unique_ids` and
  `dv_relative_paths` compute the same over a whole Arrow column.
* `decode_bitmap` / `encode_bitmap`: the serialized bitmap. We write the portable
  format (magic 1681511377) that the protocol describes and every engine reads; we also read
  Spark's native format (magic 1681511376), because the protocol's own inline example uses it.
* `load_deletion_vector`: descriptor -> verified `pyroaring.BitMap64` (file version,
  size, CRC-32 and cardinality are all checked; a mismatch is an `InvalidDeletionVector`
  naming the file and the problem, never a silently wrong set of rows).
* `encode_deletion_vector_file`, `write_deletion_vector_file` and
  `inline_descriptor`: produce new DVs to reference from a commit.

For example:

    import fsspec
    from delta_ops.protocol.deletion_vectors import (
        DeletionVectorDescriptor, load_deletion_vector, write_deletion_vector_file)

    fs = fsspec.filesystem("file")
    [desc] = write_deletion_vector_file(fs, "/data/table", [[3, 4, 7]])
    desc.to_dict()   # {'storageType': 'u', 'pathOrInlineDv': '...', 'offset': 1, ...}
    rows = load_deletion_vector(desc, "/data/table", fs)
    sorted(rows)     # [3, 4, 7]

Offsets: Spark always writes ``offset`` for on-disk DVs. When it is absent we read the DV at
offset 1, the first position a DV can occupy (byte 0 is the file's version byte). This follows
delta-kernel-rs; Spark's ``getOrElse(0)`` would point at the version byte and then fail its own
size check, so 1 is the only reading under which such a descriptor can be valid.
"""

from __future__ import annotations

import posixpath
import struct
import uuid as uuid_module
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, TypeAlias
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from delta_ops.errors import InvalidDeletionVector

#: What reading and writing DV files needs of a filesystem: fsspec's `cat_ranges` to read,
#: `makedirs`/`exists`/`open` to write. fsspec filesystems and `Storage.reader` (reading)
#: provide it; this module never imports a filesystem library itself.
FileSystem: TypeAlias = Any

__all__ = [
    "DV_FILE_FORMAT_VERSION",
    "NATIVE_MAGIC",
    "PORTABLE_MAGIC",
    "DeletionVectorDescriptor",
    "decode_bitmap",
    "dv_relative_paths",
    "dv_unique_ids",
    "encode_bitmap",
    "encode_deletion_vector_file",
    "inline_descriptor",
    "load_deletion_vector",
    "write_deletion_vector_file",
    "z85_decode",
    "z85_encode",
]

PORTABLE_MAGIC = 1681511377
"""Magic of the portable RoaringBitmapArray format (int32, little-endian): what we write."""

NATIVE_MAGIC = 1681511376
"""Magic of Spark's native RoaringBitmapArray format; read, never written."""

DV_FILE_FORMAT_VERSION = 1

STORAGE_TYPES = frozenset({"u", "i", "p"})

_MAX_ROW_INDEX = 2**63 - 1  # Delta requires the top bit of every bucket key to be 0
_MAX_INT32 = 2**31 - 1  # sizeInBytes and offset are Java Ints
_UUID_Z85_LENGTH = 20

# ---------------------------------------------------------------------------------------------
# Z85
# ---------------------------------------------------------------------------------------------

_Z85_ALPHABET = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)
_Z85_CHARS = _Z85_ALPHABET.encode("ascii")
_Z85_INVALID = 0xFF
# bytes.translate table: character -> digit value, 0xFF for characters outside the alphabet.
_Z85_DIGITS = bytes(
    _Z85_ALPHABET.index(chr(c)) if chr(c) in _Z85_ALPHABET else _Z85_INVALID for c in range(256)
)
# '#', the digit 84: 84 * 85**4 > 2**32 - 1, so no 32-bit block starts with it; the z85 crate
# marks the missing bytes of its last chunk with it (see z85_decode)
_Z85_TAIL_MARK = _Z85_ALPHABET.index("#")


def z85_encode(data: bytes) -> str:
    """Encode bytes as Z85 text (ZeroMQ alphabet, each 4-byte big-endian block -> 5 characters).

    Args:
        data: the bytes; their length must be a multiple of 4 (callers pad, see
            `inline_descriptor`).

    Returns:
        The Z85 text, ``len(data) * 5 // 4`` characters long.
    """
    if len(data) % 4:
        raise ValueError(f"Z85 encodes whole 4-byte blocks; got {len(data)} bytes (pad first)")
    out = bytearray()
    for value in struct.unpack(f">{len(data) // 4}I", data):
        block = bytearray(5)
        for i in range(4, -1, -1):
            value, digit = divmod(value, 85)
            block[i] = _Z85_CHARS[digit]
        out += block
    return out.decode("ascii")


def z85_decode(text: str) -> bytes:
    """Decode Z85 text back to bytes, as the writer of the text meant it.

    Two encoders write inline DVs, and they differ only in how they end a length that is not
    a multiple of 4:

    * Delta Spark (``Base85Codec``; also delta-ops, `inline_descriptor`) pads the data
      with zero bytes to whole 4-byte blocks. Its blocks never exceed 2**32 - 1. Delta Spark's
      ``decodeBlocks`` keeps the low 32 bits of every block (``sum.toInt``), and so do we for
      every block but the z85 tail below.
    * The ``z85`` crate (3.x; delta-rs and delta-kernel-rs write inline DVs with it) encodes a
      last chunk of ``k`` < 4 bytes as the 5 digits of its big-endian value with the first
      ``4 - k`` digits (zeros, since the value is below 256**k) replaced by ``'#'``: bytes
      ``03 00`` are ``"##093"``. ``'#'`` is the digit 84 and 84 * 85**4 > 2**32 - 1, so no
      Delta Spark block starts with it: a last block that does is that tail, decoded to its
      ``k`` bytes.

    Raises:
        InvalidDeletionVector: the length is not a multiple of 5, a character is outside the
            Z85 alphabet, or a last block starting with ``'#'`` is not a tail the z85 crate
            writes (1 to 3 ``'#'``, then the digits of a value that fits the remaining bytes).
    """
    if len(text) % 5:
        raise InvalidDeletionVector(f"invalid Z85 text: length {len(text)} is not a multiple of 5")
    try:
        raw = text.encode("ascii")
    except UnicodeEncodeError as exc:
        raise InvalidDeletionVector(
            f"invalid Z85 text: non-ASCII character at position {exc.start}"
        ) from None
    digits = raw.translate(_Z85_DIGITS)
    bad = digits.find(_Z85_INVALID)
    if bad >= 0:
        raise InvalidDeletionVector(
            f"invalid Z85 text: character {text[bad]!r} at position {bad} is not in the alphabet"
        )
    tail = b""
    if digits and digits[-5] == _Z85_TAIL_MARK:
        tail = _z85_crate_tail(digits[-5:], text[-5:])
        digits = digits[:-5]
    values = [
        _z85_block_value(digits[start : start + 5]) & 0xFFFFFFFF
        for start in range(0, len(digits), 5)
    ]
    return struct.pack(f">{len(values)}I", *values) + tail


def _z85_block_value(block: bytes) -> int:
    """The value of five Z85 digits (up to 85**5 - 1, above 32 bits)."""
    d0, d1, d2, d3, d4 = block
    return (((d0 * 85 + d1) * 85 + d2) * 85 + d3) * 85 + d4


def _z85_crate_tail(block: bytes, text: str) -> bytes:
    """The 1 to 3 bytes of the z85 crate's last chunk ``text`` (digits ``block``): as many
    bytes short of 4 as it has leading ``'#'``, the value of the remaining digits."""
    marks = len(block) - len(block.lstrip(bytes([_Z85_TAIL_MARK])))
    size = 4 - marks
    value = _z85_block_value(bytes(marks) + block[marks:])
    if size < 1 or value >= 256**size:
        raise InvalidDeletionVector(
            f"invalid Z85 text: the last block {text!r} starts with '#' but is no tail the z85"
            " crate writes (1 to 3 '#' for the missing bytes, then the value of those present)"
        )
    return value.to_bytes(size, "big")


# ---------------------------------------------------------------------------------------------
# Descriptor
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeletionVectorDescriptor:
    """The ``deletionVector`` struct of an ``add`` or ``remove`` action.

    Attributes:
        storage_type: ``'u'`` (UUID-derived relative path), ``'i'`` (inline) or ``'p'``
            (absolute path).
        path_or_inline_dv: ``<random prefix><20-char Z85 UUID>`` for ``'u'``, the Z85 bitmap for
            ``'i'``, the URL-encoded absolute path for ``'p'``.
        offset: byte position of the DV's size field in its file; ``None`` for inline DVs.
        size_in_bytes: length of the serialized bitmap (before Z85 padding for inline DVs).
        cardinality: number of deleted rows.
    """

    storage_type: str
    path_or_inline_dv: str
    _: KW_ONLY  # three numbers in a row are unreadable positionally
    offset: int | None
    size_in_bytes: int
    cardinality: int

    def __post_init__(self) -> None:
        if self.storage_type not in STORAGE_TYPES:
            raise InvalidDeletionVector(
                f"unknown deletion vector storageType {self.storage_type!r}"
                f" (expected one of 'u', 'i', 'p')"
            )
        if not isinstance(self.path_or_inline_dv, str) or not self.path_or_inline_dv:
            raise InvalidDeletionVector("deletion vector has an empty pathOrInlineDv")
        if self.storage_type == "u" and len(self.path_or_inline_dv) < _UUID_Z85_LENGTH:
            raise InvalidDeletionVector(
                f"deletion vector pathOrInlineDv {self.path_or_inline_dv!r} is shorter than"
                f" the {_UUID_Z85_LENGTH}-character Z85 UUID that storageType 'u' requires"
            )
        for name in ("size_in_bytes", "cardinality"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidDeletionVector(
                    f"deletion vector {self.path_or_inline_dv!r}: {name} must be a"
                    f" non-negative integer, got {value!r}"
                )
        if self.offset is not None and (
            not isinstance(self.offset, int) or isinstance(self.offset, bool) or self.offset < 0
        ):
            raise InvalidDeletionVector(
                f"deletion vector {self.path_or_inline_dv!r}: offset must be a non-negative"
                f" integer, got {self.offset!r}"
            )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DeletionVectorDescriptor:
        """Build a descriptor from the log's camelCase mapping (JSON action or Arrow row)."""
        try:
            return cls(
                storage_type=d["storageType"],
                path_or_inline_dv=d["pathOrInlineDv"],
                offset=d.get("offset"),
                size_in_bytes=d["sizeInBytes"],
                cardinality=d["cardinality"],
            )
        except KeyError as exc:
            raise InvalidDeletionVector(
                f"deletion vector descriptor {dict(d)!r} lacks the field {exc.args[0]!r}"
            ) from None

    def to_dict(self) -> dict[str, Any]:
        """The camelCase mapping written to the log; ``offset`` is left out when ``None``."""
        out: dict[str, Any] = {
            "storageType": self.storage_type,
            "pathOrInlineDv": self.path_or_inline_dv,
        }
        if self.offset is not None:
            out["offset"] = self.offset
        out["sizeInBytes"] = self.size_in_bytes
        out["cardinality"] = self.cardinality
        return out

    @property
    def unique_id(self) -> str:
        """``storageType + pathOrInlineDv`` (``+ '@' + offset`` when present): the dvId of
        the reconciliation key ``(path, dvId)``."""
        base = self.storage_type + self.path_or_inline_dv
        return base if self.offset is None else f"{base}@{self.offset}"

    @property
    def random_prefix(self) -> str:
        """The directory prefix of a ``'u'`` DV (often ``''``)."""
        self._require_uuid_type("random_prefix")
        return self.path_or_inline_dv[:-_UUID_Z85_LENGTH]

    def uuid(self) -> uuid_module.UUID:
        """The UUID naming a ``'u'`` DV's file (the last 20 characters, Z85-decoded)."""
        self._require_uuid_type("uuid")
        return _uuid_from_z85(self.path_or_inline_dv[-_UUID_Z85_LENGTH:])

    def relative_path(self) -> str | None:
        """``[<prefix>/]deletion_vector_<uuid>.bin`` for ``'u'``; ``None`` for ``'i'``/``'p'``."""
        if self.storage_type != "u":
            return None
        return _relative_path_of(self.path_or_inline_dv)

    def absolute_path(self, table_root: str) -> str | None:
        """Where the DV file is: joined to ``table_root`` (``'u'``), the URL-decoded path
        (``'p'``), ``None`` for inline DVs."""
        if self.storage_type == "u":
            if _prefix_leaves_root(self.path_or_inline_dv):
                raise InvalidDeletionVector(
                    f"deletion vector {self.path_or_inline_dv!r}: its path prefix leaves the"
                    " table root"
                )
            return _join(table_root, _relative_path_of(self.path_or_inline_dv))
        if self.storage_type == "p":
            return unquote(self.path_or_inline_dv)
        return None

    def _require_uuid_type(self, what: str) -> None:
        if self.storage_type != "u":
            raise InvalidDeletionVector(
                f"deletion vector {self.unique_id!r}: {what} exists only for storageType 'u',"
                f" not {self.storage_type!r}"
            )


def _uuid_from_z85(text: str) -> uuid_module.UUID:
    try:
        return uuid_module.UUID(bytes=z85_decode(text))
    except InvalidDeletionVector as exc:
        raise InvalidDeletionVector(f"deletion vector UUID {text!r}: {exc}") from None


def _relative_path_of(path_or_inline_dv: str) -> str:
    prefix = path_or_inline_dv[:-_UUID_Z85_LENGTH]
    name = f"deletion_vector_{_uuid_from_z85(path_or_inline_dv[-_UUID_Z85_LENGTH:])}.bin"
    return f"{prefix}/{name}" if prefix else name


def _prefix_leaves_root(path_or_inline_dv: str) -> bool:
    """True when a ``'u'`` descriptor's prefix (a directory under the root: random letters,
    as writers make it) climbs out of the table. The rule is the storage layer's
    `leaves_root`, restated here: importing it would load the storage stack at CLI start."""
    prefix = path_or_inline_dv[:-_UUID_Z85_LENGTH]
    if prefix.startswith("/"):
        return True
    normal = posixpath.normpath(f"{prefix}/x") if ".." in prefix else ""
    return normal == ".." or normal.startswith("../")


def _join(root: str, relative: str) -> str:
    return f"{root.rstrip('/')}/{relative}"


# ---------------------------------------------------------------------------------------------
# Arrow helpers
# ---------------------------------------------------------------------------------------------

DVColumn: TypeAlias = "pa.StructArray | pa.ChunkedArray"


def _child(dv: DVColumn, name: str) -> pa.Array | pa.ChunkedArray | None:
    struct_type = dv.type
    if struct_type.get_field_index(name) < 0:
        return None
    return pc.struct_field(dv, name)


def _as_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _null_strings(length: int) -> pa.Array:
    return pa.nulls(length, type=pa.string())


def dv_unique_ids(dv: DVColumn) -> pa.Array:
    """The ``uniqueId`` of every descriptor in an Arrow ``deletionVector`` column.

    Vectorised with ``pyarrow.compute``; null where the descriptor is null. Together with the
    file path it forms the reconciliation key ``(path, dvId)`` of log replay.

    Args:
        dv: a struct column with at least ``storageType`` and ``pathOrInlineDv`` (``offset`` is
            optional), as found in commit JSON read by Arrow and in checkpoints.

    Returns:
        A string array as long as ``dv``.
    """
    if len(dv) == 0:
        return _null_strings(0)
    storage = pc.cast(_child(dv, "storageType"), pa.string())
    path = pc.cast(_child(dv, "pathOrInlineDv"), pa.string())
    base = pc.binary_join_element_wise(storage, path, "")
    offset = _child(dv, "offset")
    if offset is not None:
        suffix = pc.binary_join_element_wise("@", pc.cast(offset, pa.string()), "")
        base = pc.if_else(pc.is_null(offset), base, pc.binary_join_element_wise(base, suffix, ""))
    # A null struct can still carry child values; the struct's own validity decides.
    return _as_array(pc.if_else(pc.is_valid(dv), base, _null_strings(1)[0]))


def dv_relative_paths(dv: DVColumn) -> pa.Array:
    """The table-relative file path of every ``'u'`` descriptor in an Arrow column.

    Null for inline (``'i'``), absolute (``'p'``) and null descriptors, and for a prefix that
    leaves the table root (no such file is ever deleted). Only the distinct
    ``'u'`` values are decoded in Python (DV files are far fewer than rows); the mapping back to
    rows is vectorised.
    """
    if len(dv) == 0:
        return _null_strings(0)
    storage = _child(dv, "storageType")
    path = pc.cast(_child(dv, "pathOrInlineDv"), pa.string())
    is_u = pc.and_kleene(pc.is_valid(dv), pc.equal(storage, "u"))
    is_u = pc.fill_null(is_u, False)
    distinct = _as_array(pc.unique(pc.filter(path, is_u))).drop_null()
    if len(distinct) == 0:
        return _null_strings(len(dv))
    for value in distinct.to_pylist():
        if len(value) < _UUID_Z85_LENGTH:
            raise InvalidDeletionVector(
                f"deletion vector pathOrInlineDv {value!r} is shorter than the"
                f" {_UUID_Z85_LENGTH}-character Z85 UUID that storageType 'u' requires"
            )
    relative = pa.array(
        [None if _prefix_leaves_root(v) else _relative_path_of(v) for v in distinct.to_pylist()],
        type=pa.string(),
    )
    mapped = pc.take(relative, pc.index_in(path, value_set=distinct))
    return _as_array(pc.if_else(is_u, mapped, _null_strings(1)[0]))


# ---------------------------------------------------------------------------------------------
# Bitmaps
# ---------------------------------------------------------------------------------------------

_PORTABLE_MAGIC_LE = struct.pack("<i", PORTABLE_MAGIC)
_NATIVE_MAGIC_LE = struct.pack("<i", NATIVE_MAGIC)
# The Delta protocol's inline example ("Deletion Vector Descriptor Schema") writes the native
# framing big-endian (magic, count, lengths).
_NATIVE_MAGIC_BE = struct.pack(">i", NATIVE_MAGIC)


def decode_bitmap(data: bytes) -> BitMap64:
    """Parse a serialized RoaringBitmapArray (the bytes a descriptor's ``sizeInBytes`` counts).

    Accepts the portable format (int32 LE magic 1681511377, then the 64-bit roaring portable
    serialization) and Spark's native format (magic 1681511376, then an int32 count of 32-bit
    bitmaps, each an int32 length and a standard 32-bit roaring serialization; bitmap ``i``
    holds the rows whose high 32 bits are ``i``). The native framing is read little-endian or,
    as in the protocol's own inline example, big-endian, as the magic's byte order says.

    Raises:
        InvalidDeletionVector: unknown magic, malformed bitmap, or a row index >= 2**63.
    """
    data = bytes(data)
    if len(data) < 4:
        raise InvalidDeletionVector(
            f"deletion vector bitmap is {len(data)} bytes, too short for the 4-byte magic"
        )
    head = data[:4]
    if head == _PORTABLE_MAGIC_LE:
        bitmap = _deserialize_portable(data[4:])
    elif head == _NATIVE_MAGIC_LE:
        bitmap = _deserialize_portable(_native_to_portable(data, "<"))
    elif head == _NATIVE_MAGIC_BE:
        bitmap = _deserialize_portable(_native_to_portable(data, ">"))
    else:
        raise InvalidDeletionVector(
            f"unknown deletion vector bitmap magic {struct.unpack('<i', head)[0]}"
            f" (bytes {head.hex()}); expected {PORTABLE_MAGIC} (portable) or"
            f" {NATIVE_MAGIC} (native)"
        )
    if bitmap and bitmap.max() > _MAX_ROW_INDEX:
        raise InvalidDeletionVector(
            f"deletion vector holds row index {bitmap.max()}, above the maximum 2**63 - 1"
        )
    return bitmap


def _deserialize_portable(payload: bytes) -> BitMap64:
    try:
        return BitMap64.deserialize(payload)
    except ValueError as exc:
        raise InvalidDeletionVector(f"malformed 64-bit roaring bitmap: {exc}") from None


def _native_to_portable(data: bytes, order: str) -> bytes:
    """Re-frame Spark's native layout as the portable one: the 32-bit payloads are identical,
    only the framing around them differs, so no row is touched in Python."""
    if len(data) < 8:
        raise InvalidDeletionVector("native deletion vector bitmap is truncated after its magic")
    (count,) = struct.unpack_from(f"{order}i", data, 4)
    if count < 0:
        raise InvalidDeletionVector(f"native deletion vector bitmap has {count} buckets")
    out = bytearray(struct.pack("<Q", count))
    position = 8
    for key in range(count):
        if position + 4 > len(data):
            raise InvalidDeletionVector(
                f"native deletion vector bitmap is truncated at bucket {key} of {count}"
            )
        (length,) = struct.unpack_from(f"{order}i", data, position)
        position += 4
        if length < 0 or position + length > len(data):
            raise InvalidDeletionVector(
                f"native deletion vector bitmap: bucket {key} declares {length} bytes,"
                f" {len(data) - position} remain"
            )
        out += struct.pack("<I", key)
        out += data[position : position + length]
        position += length
    if position != len(data):
        raise InvalidDeletionVector(
            f"native deletion vector bitmap has {len(data) - position} trailing bytes"
        )
    return bytes(out)


def _as_bitmap(rows: Iterable[int] | BitMap64) -> BitMap64:
    if isinstance(rows, BitMap64):
        bitmap = rows
    else:
        try:
            bitmap = BitMap64(rows)
        except OverflowError:
            raise InvalidDeletionVector(
                "deletion vector row indexes must be in [0, 2**63); got a value outside"
            ) from None
    if bitmap and bitmap.max() > _MAX_ROW_INDEX:
        raise InvalidDeletionVector(
            f"deletion vector row index {bitmap.max()} is >= 2**63, which Delta forbids"
        )
    return bitmap


def encode_bitmap(rows: Iterable[int] | BitMap64) -> bytes:
    """Serialize row indexes in the portable RoaringBitmapArray format (what Spark writes).

    For Spark-written DVs the result is byte-identical to Spark's (Spark also emits empty
    buckets for gaps in the high 32 bits; we do not, which readers accept).

    Raises:
        InvalidDeletionVector: a row index is negative or >= 2**63.
    """
    return _PORTABLE_MAGIC_LE + _as_bitmap(rows).serialize()


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


def load_deletion_vector(
    descriptor: DeletionVectorDescriptor, table_root: str, fs: FileSystem
) -> BitMap64:
    """Read and verify the deleted row indexes a descriptor points at.

    Inline DVs are Z85-decoded and truncated to ``sizeInBytes``. On-disk DVs are read with one
    ranged request for the version byte and one for the DV itself (never the whole file, which
    may pack many DVs); the file version, the stored size, the CRC-32 and finally the decoded
    cardinality are all checked.

    Args:
        descriptor: the DV to load.
        table_root: the table's root, joined with the relative path of ``'u'`` DVs.
        fs: a filesystem that can read the DV file (for ``'p'`` DVs: the absolute path).

    Raises:
        InvalidDeletionVector: naming the file (or ``inline``) and what is wrong.
    """
    if descriptor.storage_type == "i":
        where = "inline"
        payload = _inline_payload(descriptor)
    else:
        where = descriptor.absolute_path(table_root) or descriptor.path_or_inline_dv
        payload = _read_dv_from_file(fs, where, descriptor)
    try:
        bitmap = decode_bitmap(payload)
    except InvalidDeletionVector as exc:
        raise InvalidDeletionVector(f"{where}: {exc}") from None
    if len(bitmap) != descriptor.cardinality:
        raise InvalidDeletionVector(
            f"{where}: deletion vector holds {len(bitmap)} rows but its descriptor declares"
            f" cardinality {descriptor.cardinality}"
        )
    return bitmap


def _inline_payload(descriptor: DeletionVectorDescriptor) -> bytes:
    try:
        decoded = z85_decode(descriptor.path_or_inline_dv)
    except InvalidDeletionVector as exc:
        raise InvalidDeletionVector(f"inline: {exc}") from None
    if len(decoded) < descriptor.size_in_bytes:
        raise InvalidDeletionVector(
            f"inline: deletion vector decodes to {len(decoded)} bytes but sizeInBytes is"
            f" {descriptor.size_in_bytes}"
        )
    return decoded[: descriptor.size_in_bytes]


def _read_dv_from_file(fs: FileSystem, path: str, descriptor: DeletionVectorDescriptor) -> bytes:
    offset = 1 if descriptor.offset is None else descriptor.offset
    if offset < 1:
        raise InvalidDeletionVector(
            f"{path}: deletion vector offset {offset} points at the file's version byte"
        )
    size = descriptor.size_in_bytes
    end = offset + 4 + size + 4
    try:
        head, chunk = fs.cat_ranges([path, path], [0, offset], [1, end], on_error="raise")
    except FileNotFoundError:
        raise InvalidDeletionVector(f"{path}: deletion vector file does not exist") from None
    except OSError as exc:  # the cause is kept: a failed read is no corrupt vector
        raise InvalidDeletionVector(f"{path}: cannot read deletion vector file: {exc}") from exc
    if len(head) != 1:
        raise InvalidDeletionVector(f"{path}: deletion vector file is empty")
    if head[0] != DV_FILE_FORMAT_VERSION:
        raise InvalidDeletionVector(
            f"{path}: unsupported deletion vector file format version {head[0]}"
            f" (expected {DV_FILE_FORMAT_VERSION})"
        )
    if len(chunk) < 4:
        raise InvalidDeletionVector(
            f"{path}: file ends before the deletion vector at offset {offset}"
        )
    (stored_size,) = struct.unpack_from(">i", chunk, 0)
    if stored_size != size:
        raise InvalidDeletionVector(
            f"{path}: deletion vector at offset {offset} is {stored_size} bytes in the file"
            f" but sizeInBytes is {size}"
        )
    if len(chunk) != 4 + size + 4:
        raise InvalidDeletionVector(
            f"{path}: file is truncated: the deletion vector at offset {offset} needs"
            f" {4 + size + 4} bytes, {len(chunk)} remain"
        )
    payload = bytes(chunk[4 : 4 + size])
    (stored_crc,) = struct.unpack_from(">I", chunk, 4 + size)
    actual_crc = zlib.crc32(payload)
    if stored_crc != actual_crc:
        raise InvalidDeletionVector(
            f"{path}: CRC-32 mismatch for the deletion vector at offset {offset}:"
            f" stored {stored_crc:#010x}, computed {actual_crc:#010x}"
        )
    return payload


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def encode_deletion_vector_file(
    bitmaps: Sequence[BitMap64 | Iterable[int]],
) -> tuple[bytes, list[tuple[int, int, int]]]:
    """Lay out one DV file holding ``bitmaps`` in order.

    Returns:
        The file bytes and, per bitmap, ``(offset, size_in_bytes, cardinality)`` for its
        descriptor.

    Raises:
        InvalidDeletionVector: no bitmaps, an empty bitmap (an empty DV is expressed by having
            no DV at all), an invalid row index, or a file beyond the 2 GiB Int offsets allow.
    """
    if not bitmaps:
        raise InvalidDeletionVector("refusing to write a deletion vector file with no DVs")
    out = bytearray([DV_FILE_FORMAT_VERSION])
    entries: list[tuple[int, int, int]] = []
    for index, rows in enumerate(bitmaps):
        bitmap = _as_bitmap(rows)
        if not bitmap:
            raise InvalidDeletionVector(
                f"refusing to write empty deletion vector #{index}: a file without deleted rows"
                " carries no deletionVector"
            )
        payload = _PORTABLE_MAGIC_LE + bitmap.serialize()
        offset = len(out)
        if offset > _MAX_INT32 or len(payload) > _MAX_INT32:
            raise InvalidDeletionVector(
                f"deletion vector #{index} does not fit a DV file: offsets and sizes are int32"
            )
        out += struct.pack(">i", len(payload))
        out += payload
        out += struct.pack(">I", zlib.crc32(payload))
        entries.append((offset, len(payload), len(bitmap)))
    return bytes(out), entries


def write_deletion_vector_file(
    fs: FileSystem,
    table_root: str,
    bitmaps: Sequence[BitMap64 | Iterable[int]],
    *,
    random_prefix: str = "",
) -> list[DeletionVectorDescriptor]:
    """Write ``bitmaps`` to a new ``[<prefix>/]deletion_vector_<uuid4>.bin`` under the table.

    The file is created exclusively (never overwrites). Nothing references it until the caller
    commits the returned descriptors, so a crash leaves only an orphan that VACUUM removes.

    Args:
        fs: the table's filesystem.
        table_root: the table's root directory.
        bitmaps: the deleted row indexes, one entry per data file.
        random_prefix: optional alphanumeric sub-directory (Spark's ``delta.randomPrefixLength``
            characters when ``delta.randomizeFilePrefixes`` is on).

    Returns:
        One ``'u'`` descriptor per bitmap, in order.
    """
    if random_prefix and not (random_prefix.isascii() and random_prefix.isalnum()):
        raise ValueError(f"random_prefix must be ASCII letters and digits, got {random_prefix!r}")
    data, entries = encode_deletion_vector_file(bitmaps)
    file_uuid = uuid_module.uuid4()
    path_or_inline = random_prefix + z85_encode(file_uuid.bytes)
    path = _join(table_root, _relative_path_of(path_or_inline))
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    _create_exclusive(fs, path, data)
    return [
        DeletionVectorDescriptor(
            storage_type="u",
            path_or_inline_dv=path_or_inline,
            offset=offset,
            size_in_bytes=size,
            cardinality=cardinality,
        )
        for offset, size, cardinality in entries
    ]


def _create_exclusive(fs: FileSystem, path: str, data: bytes) -> None:
    try:
        with fs.open(path, "xb") as handle:
            handle.write(data)
        return
    except FileExistsError:
        raise InvalidDeletionVector(
            f"{path}: deletion vector file already exists; refusing to overwrite it"
        ) from None
    except (ValueError, NotImplementedError):
        pass  # this filesystem has no exclusive create; a fresh UUID4 makes a clash moot
    if fs.exists(path):
        raise InvalidDeletionVector(
            f"{path}: deletion vector file already exists; refusing to overwrite it"
        )
    with fs.open(path, "wb") as handle:
        handle.write(data)


def inline_descriptor(rows: Iterable[int] | BitMap64) -> DeletionVectorDescriptor:
    """An inline (``'i'``) descriptor for ``rows``: Z85 of the portable bitmap zero-padded to a
    multiple of 4 bytes, ``sizeInBytes`` the unpadded length, no offset.

    Inline DVs live in every checkpoint and commit that carries the file, so keep them for
    small sets of rows.
    """
    bitmap = _as_bitmap(rows)
    data = _PORTABLE_MAGIC_LE + bitmap.serialize()
    padded = data + b"\x00" * (-len(data) % 4)
    return DeletionVectorDescriptor(
        storage_type="i",
        path_or_inline_dv=z85_encode(padded),
        offset=None,
        size_in_bytes=len(data),
        cardinality=len(bitmap),
    )
