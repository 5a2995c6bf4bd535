"""Checks of landed files before Spark reads them: the compressed and Avro files that Spark cannot
read to their end when damaged, each walked once in plain Python (no Spark job), and the marker rows
(:data:`UNREADABLE_FILE`) that quarantine a damaged one as a file. Used by a local run
(:data:`STATE_DIR_ENV`); :mod:`sqlcdc.formats.base` reads the markers with the landed files."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import os
import unicodedata
import zlib
from fnmatch import fnmatchcase
from functools import partial
from pathlib import Path
from typing import Callable
from urllib.parse import quote

from sqlcdc.formats._avro_check import NOT_AS_READER, avro_claim, avro_file_problem
from sqlcdc.formats._block_check import hadoop_block_problem, hadoop_claim
from sqlcdc.formats._zstd_check import zstd_problem
from sqlcdc.transport.globs import alternatives

#: Environment variable naming the folder where a local run keeps its file checks (``sqlcdc run``
#: sets it to ``<warehouse>/_sqlcdc``). Unset (Databricks, a notebook), landed files are read as
#: Spark reads them: a corrupt compressed or Avro file then stops the read, naming the file.
STATE_DIR_ENV = "SQLCDC_STATE_DIR"

#: The key of the bronze ``value`` that stands for a landed file that cannot be read to its end
#: (:func:`sqlcdc.formats.base.rejected_before_decoding`); the pipeline quarantines such rows as files, before any decoder.
UNREADABLE_FILE = "__sqlcdc_unreadable_file"


def file_uri(path: str) -> str:
    """``file:/...``, percent-encoded, as Spark's ``_metadata.file_path`` spells a local file: as
    ``java.net.URI`` quotes a path, which keeps non-ASCII letters as they are (``ümlaut-日本.json``)
    but quotes controls and spaces (U+0085, U+00A0, U+2028).

    >>> file_uri("/l/a b/ü#1.json")
    'file:/l/a%20b/ü%231.json'
    """
    def one(c: str) -> str:
        if 0xDC80 <= ord(c) <= 0xDCFF:  # a byte of a name that is not UTF-8 (see name_problem)
            return f"%{ord(c) - 0xDC00:02X}"
        keep = ord(c) > 0x9F and unicodedata.category(c) not in ("Zs", "Zl", "Zp")
        return c if keep else quote(c, safe="/!$&'()*+,;=@~")

    return "file:" + "".join(map(one, os.path.abspath(path)))


#: How :func:`name_problem` begins: Spark cannot open the file, so none of its records lands.
NAME_NOT_UTF8 = "cannot be read: its name is not UTF-8"


def shown(path: str) -> str:
    """``path`` as text, a byte of its name that is not UTF-8 written ``\\xe9`` (a name listed
    by Python keeps such bytes as lone surrogates, which no UTF-8 writer takes)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def name_problem(path: str) -> str | None:
    """Why Spark cannot open a landed file by its name (a name whose bytes are not UTF-8: Spark's
    listing leaves such a file out without a word, 2026-12-06), else None."""
    try:
        path.encode("utf-8")
        return None
    except UnicodeEncodeError:
        name = os.fsencode(os.path.basename(path))
    try:
        name.decode("utf-8")
        return f"{NAME_NOT_UTF8} (a folder's name is not): Spark leaves it out; rename the folder"
    except UnicodeDecodeError as e:
        return f"{NAME_NOT_UTF8} (byte {name[e.start]:02x} at offset {e.start}): Spark leaves it out; rename it"


def _glob_patterns(glob: str | None) -> list[str]:
    """A Hadoop file-name glob as :mod:`fnmatch` patterns (``{a,b}`` alternatives expanded, nested
    ones too: :func:`sqlcdc.transport.globs.alternatives`)."""
    return [p.replace("[^", "[!") for p in alternatives(glob)] if glob else ["*"]


#: The landed files :class:`FileChecks` reads through: those Spark cannot read to their end when
#: damaged (plain text always can).
CHECKED_SUFFIXES = (".gz", ".bz2", ".zst", ".deflate", ".lz4", ".snappy", ".avro")


#: The longest line read as one record. Spark's text reader holds a line whole (Hadoop's ``Text``
#: doubles as it grows, then copies): one line of 600 MB stopped a 4 GB JVM with OutOfMemoryError
#: (a whole table dumped as one JSON array is such a line); 300 MB was read. Checked where Python
#: reads a file's bytes anyway or can cheaply (plain, ``.gz``, ``.bz2``, ``.deflate``).
LINE_LIMIT = 64 << 20


class _Lines:
    """Fed a file's bytes in order, finds its first line longer than :data:`LINE_LIMIT` (``long``:
    its number, else None)."""

    def __init__(self) -> None:
        self.count, self.open, self.long = 0, 0, None  # lines ended, bytes of the line still open

    def feed(self, chunk: bytes) -> None:
        if self.long is not None or not chunk:
            return
        if len(chunk) > LINE_LIMIT:  # a line could lie inside it: walk its line ends
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                self._ended(self.open + end - start)
                self.open, start = 0, end + 1
            self.open += len(chunk) - start
        elif (first := chunk.find(b"\n")) < 0:
            self.open += len(chunk)
        else:  # only the line it continues can be long
            self._ended(self.open + first)
            self.count += chunk.count(b"\n") - 1
            self.open = len(chunk) - chunk.rfind(b"\n") - 1
        if self.long is None and self.open > LINE_LIMIT:
            self.long = self.count + 1

    def _ended(self, length: int) -> None:
        self.count += 1
        if self.long is None and length > LINE_LIMIT:
            self.long = self.count

    def problem(self) -> str | None:
        limit = f"{LINE_LIMIT >> 20} MiB" if LINE_LIMIT % (1 << 20) == 0 else f"{LINE_LIMIT:,} bytes"
        return None if self.long is None else (
            f"{LONG_LINE}{self.long} is longer than {limit}, more than sqlcdc reads as one record")


#: How :func:`compressed_file_problem` begins for a file with a line longer than :data:`LINE_LIMIT`.
LONG_LINE = "cannot be read: line "


def _plain_problem(path: str) -> str | None:
    lines = _Lines()
    try:
        with open(path, "rb") as fh:
            while (chunk := fh.read(1 << 20)) and lines.long is None:
                lines.feed(chunk)
    except OSError as e:
        return f"cannot be read: {e.strerror or e}"
    return lines.problem()


def compressed_file_problem(path: str, lines: bool = False) -> str | None:
    """Why a compressed landed file (``.gz``, ``.bz2``, ``.zst``, ``.deflate``, ``.lz4``, ``.snappy``)
    cannot be read to its end, else None (other files: None). With ``lines`` (Spark reads the file as
    lines) also a line longer than :data:`LINE_LIMIT`, in plain files and in what ``.gz``, ``.bz2``
    and ``.deflate`` decompress to.

    Spark (Hadoop's codecs) fails the whole read on a compressed file cut short or not compressed at
    all, or -- ``.lz4``/``.snappy`` -- reads it as ending early or as nothing; Python tells it before
    Spark opens the file (``.zst``: :mod:`sqlcdc.formats._zstd_check`; ``.lz4``, ``.snappy``:
    :mod:`sqlcdc.formats._block_check`)."""
    low = path.lower()
    walkers = {".zst": ("zstd", zstd_problem), ".lz4": ("Hadoop lz4", partial(hadoop_block_problem, codec="lz4")),
               ".snappy": ("Hadoop snappy", partial(hadoop_block_problem, codec="snappy"))}
    for suffix, (kind, walk) in walkers.items():
        if low.endswith(suffix):
            try:
                with open(path, "rb") as fh:
                    problem = walk(fh)
            except OSError as e:
                problem = f"{e.strerror or e}"
            return problem and f"cannot be read: not a whole {kind} file ({problem})"
    counted = _Lines() if lines else None
    if low.endswith(".deflate"):
        problem = _zlib_problem(path, counted)
        return (problem and f"cannot be read: not a whole zlib (.deflate) file ({problem})") or (counted and counted.problem())
    opener = gzip.open if low.endswith(".gz") else bz2.open if low.endswith(".bz2") else None
    if opener is None:
        return _plain_problem(path) if lines else None
    kind = "gzip" if opener is gzip.open else "bzip2"
    try:
        with opener(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                if counted:
                    counted.feed(chunk)
    except (OSError, EOFError, ValueError, zlib.error) as e:
        return f"cannot be read: not a whole {kind} file ({type(e).__name__}: {str(e)[:200]})"
    return counted and counted.problem()


def _zlib_problem(path: str, lines: _Lines | None = None) -> str | None:
    """Why ``path`` is not zlib streams one after another (Hadoop's ``DefaultCodec``, ``.deflate``,
    reads them so), else None; ``lines`` is fed what it decompresses to. An empty file is whole (no lines)."""
    z, seen = zlib.decompressobj(), False
    try:
        with open(path, "rb") as fh:
            while data := fh.read(1 << 20):
                seen = True
                while data:
                    out = z.decompress(data)
                    if lines:
                        lines.feed(out)
                    data = z.unused_data
                    if z.eof:
                        z, seen = zlib.decompressobj(), bool(data)
    except OSError as e:
        return f"{e.strerror or e}"
    except zlib.error as e:
        return f"zlib.error: {str(e)[:200]}"
    return "cut short: its last stream does not end" if seen else None


def landed_file_problem(path: str, avro_reader: dict | None = None, lines: bool = False) -> str | None:
    """Why a landed ``.gz``/``.bz2`` (:func:`compressed_file_problem`) or Avro container file
    (:func:`sqlcdc.formats._avro_check.avro_file_problem`, as ``avro_reader`` records) cannot be
    read to its end, else None; ``lines``: a file read as lines, whose lines are measured too
    (:data:`LINE_LIMIT`)."""
    if path.lower().endswith(".avro"):
        return avro_file_problem(path, avro_reader)
    return compressed_file_problem(path, lines)


class FileChecks:
    """:func:`landed_file_problem`, remembering whole files by size and modification time in
    ``<state>/unreadable/checked.json`` so each is read through once, not on every run. Without a
    state folder (``state=None``) nothing is remembered.

    >>> checks = FileChecks(None)
    >>> checks.problem("landing/a.json") is None   # neither compressed nor Avro: nothing to check
    True
    """

    def __init__(self, state: Path | None) -> None:
        self._path = state / "unreadable" / "checked.json" if state else None
        self._whole: dict[str, list[int]] = {}
        if self._path is not None:
            try:
                self._whole = json.loads(self._path.read_text())
            except (OSError, ValueError):
                self._whole = {}
        self._changed = False

    @classmethod
    def of_this_run(cls) -> "FileChecks":
        """The checks of a local run (:data:`STATE_DIR_ENV`), else ones that remember nothing."""
        state = os.environ.get(STATE_DIR_ENV)
        return cls(Path(state) if state else None)

    def problem(self, path: str, avro_reader: dict | None = None, *,
                whole: Callable[[str], str | None] | None = None, lines: bool = False) -> str | None:
        """Why ``path`` cannot be read to its end (:func:`landed_file_problem`, or the check ``whole``
        when given, whatever the file's suffix), else None; ``lines``: Spark reads it as lines, so
        a plain file is read through too, for its line lengths. A whole file is not read again."""
        if whole is None and not lines and not path.lower().endswith(CHECKED_SUFFIXES):
            return None
        try:
            st = os.stat(path)
        except OSError as e:
            return f"cannot be read: {e.strerror or e}"
        stamp = [st.st_size, st.st_mtime_ns, "lines" if lines else "file"]  # what was checked of it
        if self._whole.get(path) == stamp:
            return None
        problem = whole(path) if whole else landed_file_problem(path, avro_reader, lines)
        if problem is None:
            self._whole[path] = stamp
            self._changed = True
        return problem

    def save(self) -> None:
        if self._path is not None and self._changed:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._path.with_name(f".{self._path.name}.tmp")
            tmp.write_text(json.dumps(self._whole))
            os.replace(tmp, self._path)
            self._changed = False


def landed_paths(folder: str) -> list[str]:
    """The files below ``folder`` that Spark's file source reads (its folders too, as
    :data:`sqlcdc.transport.files.NESTED_FOLDERS` asks; names ``_*`` and ``.*`` skipped), sorted."""
    out = []
    for root, dirs, files in os.walk(folder):  # a missing folder: nothing (Spark's own read says so)
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        out += [p for f in sorted(files) if not f.startswith(("_", "."))
                and os.path.isfile(p := os.path.join(root, f))]  # not a FIFO (opening one would wait forever)
    return out


#: A buffer a reader would allocate for data the file does not hold (Hadoop's block codecs:
#: :func:`hadoop_claim`; Avro's: :func:`avro_claim`), past which Spark is not let open the file: a
#: heap may not have room for it, and an OutOfMemoryError in a task stops a local run's JVM. Hadoop
#: writes chunks of 256 KiB, Avro blocks of about 64 KiB.
CLAIM_LIMIT = 64 << 20

#: The key of a marker (beside ``value`` and ``source_file``) naming a file that Spark's read leaves
#: out (:func:`kept_from_spark`).
KEPT = "kept_from_spark"


def _too_big_to_open(path: str, problem: str) -> str | None:
    """Why Spark must not open ``path`` (whose check found ``problem``) at all, else None: a line
    longer than :data:`LINE_LIMIT`, or an ``.lz4``/``.snappy`` file (Hadoop's block codecs) or an
    ``.avro`` file (Avro's reader) that makes its reader allocate more than :data:`CLAIM_LIMIT` for
    a length the file does not hold."""
    if problem.startswith(LONG_LINE):
        return "Spark is not let open it: its text reader would hold that line whole, enough to stop the JVM"
    kind = path.lower().rsplit(".", 1)[-1]
    if kind == "avro":
        claim, reader = avro_claim(path), "Avro's reader"
    elif kind in ("lz4", "snappy"):
        try:
            with open(path, "rb") as fh:
                claim, reader = hadoop_claim(fh, kind), f"Hadoop's {kind} codec"
        except OSError:
            return None
    else:
        return None
    return (f"Spark is not let open it: {reader} would allocate {claim:,} bytes for data the file does not "
            "hold, enough to stop the JVM") if claim > CLAIM_LIMIT else None


def check_landed_files(folder: str, glob: str | None, state: Path, avro_reader: dict | None = None) -> Path:
    """Check the compressed and Avro files Spark's file source would read in ``folder`` and the folders
    below it (files whose name matches ``glob``, hidden and ``_`` ones skipped); return the folder of
    marker files, one JSON line per file that cannot be read (:data:`UNREADABLE_FILE`). Plain Python,
    no Spark job.

    A file Spark must not open (:func:`_too_big_to_open`) is marked :data:`KEPT`, and so is any other
    landed file of the same name (Spark's file source leaves files out by name): the read leaves
    them out (:func:`kept_from_spark`), and none of their records lands.

    A file is checked once (:class:`FileChecks`); a damaged one keeps its marker, so a full
    refresh quarantines the file again."""
    key = hashlib.sha256(f"{os.path.abspath(folder)}\u0001{glob or ''}".encode()).hexdigest()[:16]
    markers = state / "unreadable" / key
    markers.mkdir(parents=True, exist_ok=True)
    checks = FileChecks(state)
    patterns = _glob_patterns(glob)
    paths = [p for p in landed_paths(folder) if any(fnmatchcase(os.path.basename(p), g) for g in patterns)]

    def mark(path: str, reason: str, kept: bool) -> None:
        line = {"value": "\n" + json.dumps({UNREADABLE_FILE: reason}), "source_file": file_uri(path)}
        if kept:
            line[KEPT] = os.path.basename(path)
        # a leading newline: no landed line can hold one, so no record can pass for a marker
        marker = marker_of(path)
        tmp = markers / f".{marker.name}.tmp"  # hidden: Spark's file source skips it
        tmp.write_text(json.dumps(line) + "\n")
        os.replace(tmp, marker)  # whole or absent: the marker stream never reads half a line

    def marker_of(path: str) -> Path:
        return markers / (hashlib.sha256(os.fsencode(path)).hexdigest()[:32] + ".json")

    for path in paths:
        if marker_of(path).exists():
            continue
        problem = name_problem(path) or checks.problem(path, avro_reader, lines=avro_reader is None)
        if problem is None:
            continue
        kept = _too_big_to_open(path, problem)
        landed = "none of its records was landed" if kept or problem.startswith((NOT_AS_READER, NAME_NOT_UTF8)) else \
            "what could be read before the damage was landed as usual"
        where = shown(os.path.relpath(path, folder))  # relative: 2026/12/x.json.gz
        mark(path, f"file {where} {problem}; {kept + '; ' if kept else ''}{landed}", bool(kept))
    checks.save()
    kept_names = kept_from_spark(markers)
    for path in paths:
        if os.path.basename(path) in kept_names and not marker_of(path).exists():
            mark(path, f"file {shown(os.path.relpath(path, folder))} cannot be read: it has the name of a landed file "
                       "Spark is not let open, and Spark's file source leaves files out by name; rename it; none of "
                       "its records was landed", True)
    return markers


def kept_from_spark(markers: Path) -> set[str]:
    """The file names a read must leave out (markers :data:`KEPT` by :func:`check_landed_files`)."""
    names = set()
    for marker in markers.glob("*.json"):
        try:
            names.add(json.loads(marker.read_text()).get(KEPT))
        except (OSError, ValueError):
            continue
    return names - {None}
