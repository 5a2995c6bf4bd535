"""Whether a Zstandard file (``.zst``) is whole: its frames walked in plain Python, no zstd library.

Spark reads a landed ``.zst`` through Hadoop's ``ZStandardCodec`` (zstd-jni), which fails the whole
read at a file cut short ("Truncated source"). The layout (RFC 8878, "Zstandard Frames")::

    frame:     magic 28 b5 2f fd, a frame header (its size from its first byte), blocks, a 4-byte
               checksum when the header says so
    block:     3-byte little-endian header (bit 0: last block, bits 1-2: type, bits 3-23: size),
               then ``size`` bytes (raw, compressed) or 1 byte (RLE); type 3 is reserved
    skippable: magic 5? 2a 4d 18, a 4-byte little-endian size, that many bytes

Frames follow each other to the file's end. Checked: that the chain of frames and blocks ends
exactly at the file's end. Not checked: the compressed bytes themselves (no decoder here).

>>> zstd_problem(b"(\\xb5/\\xfd\\x20\\x02\\x11\\x00\\x00hi") is None  # one frame, one raw last block "hi"
True
"""

from __future__ import annotations

import io
from typing import BinaryIO

MAGIC = b"\x28\xb5\x2f\xfd"


def zstd_problem(source: bytes | BinaryIO) -> str | None:
    """Why ``source`` (bytes, or a seekable binary file) is not a whole sequence of Zstandard frames,
    else None. Only the headers are read: a block's bytes are skipped, not loaded."""
    fh = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
    size = fh.seek(0, io.SEEK_END)

    def at(pos: int, n: int) -> bytes:
        fh.seek(pos)
        return fh.read(n)

    pos, frame = 0, 0
    while pos < size:
        frame += 1
        start = pos
        head = at(pos, 4)
        if len(head) < 4:
            return f"frame {frame} cut short at byte {size}"
        if head[1:] == b"\x2a\x4d\x18" and head[0] & 0xF0 == 0x50:  # a skippable frame
            if pos + 8 > size:
                return f"frame {frame} cut short at byte {size}"
            pos += 8 + int.from_bytes(at(pos + 4, 4), "little")
            if pos > size:
                return f"frame {frame} (skippable) cut short at byte {size}"
            continue
        if head != MAGIC:
            return f"no Zstandard magic bytes at byte {start} (frame {frame})"
        if pos + 5 > size:
            return f"frame {frame} cut short at byte {size}"
        descriptor = at(pos + 4, 1)[0]
        if descriptor & 0x08:
            return f"frame {frame} at byte {start}: its header sets the reserved bit"
        single = bool(descriptor & 0x20)
        content_size = (1 if single else 0, 2, 4, 8)[descriptor >> 6]
        pos += 5 + (0 if single else 1) + (0, 1, 2, 4)[descriptor & 0x03] + content_size
        while True:
            if pos + 3 > size:
                return f"frame {frame} cut short at byte {size}"
            header = int.from_bytes(at(pos, 3), "little")
            kind, length = (header >> 1) & 0x03, header >> 3
            if kind == 3:
                return f"frame {frame}: a block of the reserved type at byte {pos}"
            pos += 3 + (1 if kind == 1 else length)
            if pos > size:
                return f"frame {frame} cut short at byte {size}"
            if header & 1:
                break
        pos += 4 if descriptor & 0x04 else 0
        if pos > size:
            return f"frame {frame} cut short at byte {size} (its checksum)"
    return None  # an empty file too: Spark reads it as no lines
