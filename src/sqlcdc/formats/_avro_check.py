"""Whether an Avro object container file can be read to its end: plain Python, no Avro library.

The layout (Avro specification, "Object Container Files")::

    header:  b"Obj\\x01", file metadata (an Avro map of bytes: avro.schema, avro.codec), 16-byte sync marker
    blocks:  object count (long), byte size (long), that many bytes, the header's sync marker again

Longs are zig-zag varints; a map is blocks of entries, each block's count a long (a negative count
-n means n entries preceded by the block's byte size), ended by a count of 0. Spark's Avro reader
(Avro's DataFileStream) fails the whole read at a block cut short, a sync marker that differs from
the header's, a block of junk or a file that is not Avro; :func:`avro_file_problem` tells the same
before Spark opens the file. Each block of codec ``deflate``, ``snappy`` (with its CRC32), ``bzip2``
or ``xz`` is decompressed; of ``zstandard`` only the framing is checked. An unknown codec is a
problem too: Spark cannot read such a file at all; so is, given the reader's schema, a writer
schema whose fields Avro's schema resolution cannot read as it (:func:`resolution_problem`). Not checked: that the records of a block decode
with the file's schema (a block with the right framing and codec data but bytes changed inside).
"""

from __future__ import annotations

import bz2
import json
import lzma
import os
import zlib
from typing import Any, BinaryIO, Callable

from sqlcdc.formats._block_check import snappy_size

MAGIC = b"Obj\x01"
SYNC_SIZE = 16
#: The codecs Avro's Java reader (Spark's) knows; a file with another cannot be read by Spark.
KNOWN_CODECS = frozenset({"null", "deflate", "snappy", "bzip2", "xz", "zstandard"})


#: How :func:`avro_file_problem` begins where a whole file's writer schema is not readable as the reader's.
NOT_AS_READER = "cannot be read as "


class _Damaged(Exception):
    """The file is not a whole Avro container file; the message says where."""


class _Unreadable(_Damaged):
    """The file is whole, but its writer schema cannot be read as the reader schema."""


class _Reader:
    """Reads a file front to back; a read past its end names what was cut short."""

    def __init__(self, fh: BinaryIO, size: int) -> None:
        self.fh, self.size, self.pos = fh, size, 0
        self.claim = 0  # the length of a read past the end (Avro's reader allocates it first)

    def take(self, n: int, what: str) -> bytes:
        if n < 0:
            raise _Damaged(f"{what} at byte {self.pos} has a negative length")
        if self.pos + n > self.size:
            self.claim = n
            raise _Damaged(f"{what} cut short at byte {self.size}")
        self.pos += n
        return self.fh.read(n)

    def long(self, what: str) -> int:
        """A zig-zag varint long (at most 10 bytes)."""
        start, shift, acc = self.pos, 0, 0
        while True:
            b = self.take(1, what)[0]
            acc |= (b & 0x7F) << shift
            if not b & 0x80:
                return (acc >> 1) ^ -(acc & 1)
            shift += 7
            if shift >= 70:
                raise _Damaged(f"{what} at byte {start} is not a varint long")


def _metadata(r: _Reader) -> dict[str, bytes]:
    meta: dict[str, bytes] = {}
    while count := r.long("header metadata"):
        if count < 0:
            count = -count
            r.long("header metadata")  # the block's byte size
        for _ in range(count):
            key = r.take(r.long("header metadata"), "header metadata")
            meta[key.decode("utf-8", "replace")] = r.take(r.long("header metadata"), "header metadata")
    return meta


def _unsnappy(data: bytes) -> bytes:
    """Snappy's raw format, decompressed (what Avro's snappy codec writes before each block's CRC32;
    :func:`sqlcdc.formats._block_check.snappy_size` walks it). Raises ValueError."""
    out = bytearray()
    snappy_size(data, out)
    return bytes(out)


def _snappy(body: bytes) -> None:
    """A snappy block: the snappy data, then the CRC32 (big-endian) of what it decompresses to."""
    if len(body) < 4:
        raise ValueError("no room for its snappy CRC32")
    if zlib.crc32(_unsnappy(body[:-4])) != int.from_bytes(body[-4:], "big"):
        raise ValueError("its snappy CRC32 does not match")


#: Codec -> a check of one block's bytes (raises when they do not decompress whole), as Avro's Java
#: codecs read them. zstandard has no reader in Python's standard library: its blocks are not opened.
_BLOCK_CHECKS: dict[str, Callable[[bytes], object]] = {
    "deflate": lambda body: zlib.decompress(body, -15),
    "snappy": _snappy,
    "bzip2": bz2.decompress,
    "xz": lzma.decompress,
}
_BLOCK_ERRORS = (ValueError, EOFError, OSError, zlib.error, lzma.LZMAError)


#: Avro's schema resolution: the writer types a reader type reads (the specification's promotions).
_PROMOTED = {"long": {"int"}, "float": {"int", "long"}, "double": {"int", "long", "float"},
             "string": {"bytes"}, "bytes": {"string"}}


def _branches(t: Any) -> list[Any]:
    """The types a value of ``t`` may have: a union's branches but null, or ``t`` itself."""
    return [b for b in t if b != "null"] if isinstance(t, list) else [t]


def _name(t: Any) -> str:
    return t.get("type", "?") if isinstance(t, dict) else str(t)


def resolution_problem(writer: Any, reader: dict) -> str | None:
    """Why records of the ``writer`` schema cannot be read as the ``reader`` record (Avro schema
    resolution of its fields: each primitive type the same or promoted; a reader field missing
    from the writer needs a default), else None. Only primitive reader fields are compared.

    >>> resolution_problem({"type": "record", "name": "R", "fields": [{"name": "id", "type": "int"}]},
    ...                    {"type": "record", "name": "R", "fields": [{"name": "id", "type": ["null", "string"], "default": None}]})
    'its Avro schema gives field id the type int, which Avro does not read as string'
    """
    if not (isinstance(writer, dict) and writer.get("type") == "record"):
        return f"its Avro schema is {_name(writer)[:40]}, not a record ({reader.get('name')})"
    written = {f.get("name"): f.get("type") for f in writer.get("fields", [])}
    for field in reader.get("fields", []):
        name = field["name"]
        if name not in written:
            if "default" not in field:
                return f"its Avro schema has no field {name}"
            continue
        wanted = [_name(t) for t in _branches(field["type"])]
        for got in map(_name, _branches(written[name])):
            if got != "null" and not any(got == w or got in _PROMOTED.get(w, ()) for w in wanted):
                return f"its Avro schema gives field {name} the type {got[:40]}, which Avro does not read as {' or '.join(wanted)}"
    return None


def _check(r: _Reader, reader: dict | None = None) -> None:
    """Raises :class:`_Damaged` where the file stops being a whole Avro container file (or, with a
    ``reader`` schema, where its records cannot be read as that: :func:`resolution_problem`)."""
    if r.size < len(MAGIC) or r.take(len(MAGIC), "magic") != MAGIC:
        raise _Damaged("no Avro magic bytes Obj\\x01 at its start")
    meta = _metadata(r)
    try:
        writer = json.loads(meta["avro.schema"])
    except (KeyError, ValueError):
        raise _Damaged("no JSON avro.schema in its header") from None
    if reader is not None and (problem := resolution_problem(writer, reader)):
        raise _Unreadable(problem)
    codec = meta.get("avro.codec", b"null").decode("utf-8", "replace")
    if codec not in KNOWN_CODECS:
        raise _Damaged(f"avro.codec {codec[:40]!r} is none of {', '.join(sorted(KNOWN_CODECS))}")
    sync = r.take(SYNC_SIZE, "header sync marker")
    block = 0
    while r.pos < r.size:
        block += 1
        start, what = r.pos, f"block {block}"
        count, size = r.long(what), r.long(what)
        if count < 0 or size < 0:
            raise _Damaged(f"{what} at byte {start} has a negative object count or byte size")
        body = r.take(size, what)
        if r.take(SYNC_SIZE, what) != sync:
            raise _Damaged(f"{what} at byte {start} does not end with the header's sync marker")
        check = _BLOCK_CHECKS.get(codec)
        try:
            if check is not None:
                check(body)
        except _BLOCK_ERRORS as e:
            raise _Damaged(f"{what} at byte {start} does not decompress as {codec}: {str(e)[:200]}") from None


def avro_claim(path: str) -> int:
    """The bytes Avro's reader would allocate for a length (a block's byte size, a header value's)
    that ``path`` does not hold, else 0: it makes the buffer before reading into it, whatever the
    file's size (a block claiming 1.5 GB stopped a 1 GB JVM with OutOfMemoryError, 2026-12-06)."""
    try:
        with open(path, "rb") as fh:
            r = _Reader(fh, os.fstat(fh.fileno()).st_size)
            try:
                _check(r)
            except _Damaged:
                pass
            return r.claim
    except OSError:
        return 0


def avro_file_problem(path: str, reader: dict | None = None) -> str | None:
    """Why the Avro container file at ``path`` cannot be read to its end (or, given a ``reader``
    schema, as that schema's records), else None. An empty file is whole: Spark reads it as no
    records, as it reads an empty file of lines (one landed before its writer wrote it)."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size:
                _check(_Reader(fh, size), reader)
    except _Unreadable as e:
        return f"{NOT_AS_READER}{reader and reader.get('name')} records: {e}"
    except _Damaged as e:
        return f"cannot be read: not a whole Avro container file ({e})"
    except OSError as e:
        return f"cannot be read: {e.strerror or e}"
    return None
