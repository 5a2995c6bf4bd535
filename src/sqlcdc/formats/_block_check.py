"""Whether a landed ``.lz4`` or ``.snappy`` file is whole, in Hadoop's block format: walked in plain
Python, no lz4 or snappy library.

Spark reads these suffixes through Hadoop's ``Lz4Codec`` / ``SnappyCodec``, whose
``BlockDecompressorStream`` expects its own layout, not the lz4 tool's frames or framed Snappy::

    file:   blocks to the file's end
    block:  4-byte big-endian length of the block's bytes once decompressed (0 ends the stream),
            then chunks until they add up to it
    chunk:  4-byte big-endian length, then that many bytes of raw LZ4 block / raw Snappy data

Hadoop takes a file cut short as one that ends there (the lines of the cut block are lost without a
word) and reads a 4-byte length out of anything else: an lz4-tool file (magic ``04 22 4d 18``) read as
no lines at all, or, with a small heap, a 1.7 GB buffer stopped the JVM (OutOfMemoryError, found
2026-12-06). Checked here: the chain of blocks and chunks ends exactly at the file's end, each chunk's
data walked (literals and copies, each copy inside what came before it) to the length it decompresses
to, and a chunk no larger than Hadoop's decompression buffer (256 KiB by default).

>>> hadoop_block_problem(b"\\x00\\x00\\x00\\x02\\x00\\x00\\x00\\x03\\x20hi", "lz4") is None  # "hi" as one literal
True
"""

from __future__ import annotations

import io
from typing import BinaryIO

#: Hadoop's decompression buffer (``io.compression.codec.lz4.buffersize`` and
#: ``io.compression.codec.snappy.buffersize``, 256 KiB by default): a chunk decompressing to more
#: fails Spark's read.
BUFFER_SIZE = 256 * 1024

#: What such a file begins with when another tool wrote it (named in the reason).
_OTHER_LAYOUTS = (
    (b"\x04\x22\x4d\x18", "an LZ4 frame file, as the lz4 tool writes it"),
    (b"\xff\x06\x00\x00sNaPpY", "framed Snappy, as python-snappy and snappy-java's framed stream write it"),
    (b"\x82SNAPPY\x00", "snappy-java's stream format"),
)


def _lz4_length(data: bytes, i: int, length: int) -> tuple[int, int]:
    """An LZ4 length of 15 continued by the bytes at ``i`` (each added, until one is not 255):
    (the length, the index after them)."""
    while length >= 15:
        if i >= len(data):
            raise ValueError("its LZ4 data is cut short")
        length, i = length + data[i], i + 1
        if data[i - 1] != 255:
            break
    return length, i


def lz4_block_size(data: bytes) -> int:
    """The length raw LZ4 block ``data`` decompresses to; ValueError when it is not one."""
    i, n, out = 0, len(data), 0
    while True:
        if i >= n:
            raise ValueError("its LZ4 data is cut short")
        token = data[i]
        literals, i = _lz4_length(data, i + 1, token >> 4)
        i += literals
        out += literals
        if i > n:
            raise ValueError("an LZ4 literal runs past the chunk")
        if i == n:
            return out  # the last sequence: literals only
        if i + 2 > n:
            raise ValueError("its LZ4 data is cut short")
        offset = data[i] | data[i + 1] << 8
        if not 0 < offset <= out:
            raise ValueError("an LZ4 copy points outside what was decompressed")
        match, i = _lz4_length(data, i + 2, token & 15)
        out += match + 4


def snappy_size(data: bytes, out: bytearray | None = None) -> int:
    """The length raw Snappy ``data`` decompresses to, walked without decompressing it -- or, given
    ``out``, decompressed into it (Avro's snappy blocks, whose CRC32 needs the bytes). ValueError
    when it is not Snappy data or does not decompress to the length it begins with."""
    want, shift, i, n = 0, 0, 0, len(data)
    while True:
        if i >= n or shift > 28:
            raise ValueError("its Snappy length is not a varint")
        want |= (data[i] & 0x7F) << shift
        shift += 7
        i += 1
        if not data[i - 1] & 0x80:
            break
    size = 0
    while i < n and size <= want:
        tag, kind = data[i], data[i] & 3
        i += 1
        if kind == 0:  # literal: length in the tag, or in the 1-4 bytes after it
            length = tag >> 2
            if length >= 60:
                length, i = int.from_bytes(data[i:i + length - 59], "little"), i + length - 59
            if i + length + 1 > n:
                raise ValueError("a Snappy literal runs past the chunk")
            if out is not None:
                out += data[i:i + length + 1]
            i += length + 1
            size += length + 1
            continue
        if kind == 1:
            length, offset, i = ((tag >> 2) & 7) + 4, (tag >> 5) << 8 | (data[i] if i < n else 0), i + 1
        else:
            width = 2 if kind == 2 else 4
            length, offset, i = (tag >> 2) + 1, int.from_bytes(data[i:i + width], "little"), i + width
        if i > n:
            raise ValueError("its Snappy data is cut short")
        if not 0 < offset <= size:
            raise ValueError("a Snappy copy points outside what was decompressed")
        if out is not None:
            piece = out[size - offset:size - offset + length]
            out += (piece * (length // len(piece) + 1))[:length]  # a copy may overlap its own output
        size += length
    if size != want:
        raise ValueError(f"its Snappy data decompresses to {size} bytes, not the {want} it says")
    return size


def hadoop_block_problem(source: bytes | BinaryIO, codec: str) -> str | None:
    """Why ``source`` (bytes, or a seekable binary file) is not a whole Hadoop block-compressed stream
    of ``codec`` (``"lz4"`` or ``"snappy"``), else None. An empty file is whole (no lines)."""
    return _walk(source, codec)[0]


def hadoop_claim(source: bytes | BinaryIO, codec: str) -> int:
    """The bytes Hadoop's ``BlockDecompressorStream`` would allocate for a chunk that ``source`` does
    not hold (0: none): it reads a chunk's 4-byte length and makes a buffer that large before reading
    the chunk, whatever the file's size. An lz4-tool file's header read so asks for ~1.7 GB, framed
    Snappy's for ~1.9 GB; a Hadoop file cut short asks for at most its last chunk (256 KiB).

    >>> hadoop_claim(bytes.fromhex("04224d18 6440a7") + bytes(20), "lz4")  # an LZ4 frame's header
    1681958656
    >>> hadoop_claim(bytes.fromhex("00000002 00000003 20"), "lz4")  # a Hadoop chunk cut short
    3
    """
    fh = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
    at = _walk(fh, codec)[1]
    if at < 0:
        return 0
    size = fh.seek(0, io.SEEK_END)
    fh.seek(at)
    field = fh.read(4)
    n = int.from_bytes(field, "big") if len(field) == 4 else 0
    return n if n < 1 << 31 and n > size - at - 4 else 0  # a negative length allocates nothing


def _walk(source: bytes | BinaryIO, codec: str) -> tuple[str | None, int]:
    """(:func:`hadoop_block_problem`, the offset of the chunk length Hadoop reads last before it
    fails, or -1 when it fails before reading one past the file's end)."""
    fh = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
    size = fh.seek(0, io.SEEK_END)
    fh.seek(0)
    head = fh.read(10)
    for magic, what in _OTHER_LAYOUTS:
        if head.startswith(magic):
            return f"it is {what}, not Hadoop's {codec} block format", 4  # bytes 0-3 a block's length, 4-7 a chunk's
    walk = lz4_block_size if codec == "lz4" else snappy_size
    fh.seek(0)
    pos, block = 0, 0
    while pos < size:
        block += 1
        start = fh.read(4)
        if len(start) < 4:
            return f"block {block} cut short at byte {size}", -1
        want = int.from_bytes(start, "big")
        pos += 4
        if want == 0:
            if pos == size:
                return None, -1  # what Hadoop writes for no data: the stream ends here
            return (f"block {block} at byte {pos - 4} is empty, which ends the stream Hadoop reads: the {size - pos} "
                    "bytes after it would be lost"), -1
        if want > 1 << 30:
            return f"block {block} at byte {pos - 4} says it holds {want} bytes: not Hadoop's {codec} block format", pos
        got, chunk = 0, 0
        while got < want:
            chunk += 1
            length = fh.read(4)
            if len(length) < 4:
                return f"block {block} cut short at byte {size}", -1
            n = int.from_bytes(length, "big")
            if not 0 < n <= size - pos - 4:
                return (f"block {block} cut short at byte {size}" if n > size - pos - 4 and n < 1 << 30 else
                        f"chunk {chunk} of block {block} at byte {pos} says it holds {n} bytes: not Hadoop's {codec} "
                        "block format"), pos
            data = fh.read(n)
            try:
                out = walk(data)
            except ValueError as e:
                return f"chunk {chunk} of block {block} at byte {pos}: {e}", -1
            if out > BUFFER_SIZE:
                return (f"chunk {chunk} of block {block} at byte {pos} decompresses to {out} bytes, more than Hadoop's "
                        f"{codec} buffer (io.compression.codec.{codec}.buffersize, {BUFFER_SIZE})"), -1
            got += out
            pos += 4 + n
        if got != want:
            return f"block {block}'s chunks decompress to {got} bytes, not the {want} its header says", -1
    return None, -1
