"""What a local change-table export's first line (CSV) or footer (Parquet) says: its column names
(and for Parquet their types), or why they cannot be mapped to change-table columns. Plain Python
(csv, pyarrow), no Spark job: :mod:`sqlcdc.formats._ct_exports` groups the files by what it finds
and reads each group with its own header or schema."""

from __future__ import annotations

import bz2
import csv
import gzip
import io

from sqlcdc.formats._ct_names import META_COLUMNS, REQUIRED_COLUMNS


def columns_problem(names: list[str], what: str) -> str | None:
    """Why a file's columns cannot be mapped to change-table columns (None: they can)."""
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:  # the first problem to tell: the rest is noise when this is not a header at all
        shown = ", ".join(repr(n[:40]) for n in names[:6]) + (", ..." if len(names) > 6 else "")
        return (f"its {what} lacks {', '.join(missing)} (it has {shown}): not a change-table export, "
                "or its first line is not a header")
    problems, seen = [], set()
    for i, n in enumerate(names, 1):
        if n.strip() == "":
            problems.append(f"column {i} of its {what} has no name")
        elif n.lower() in seen:
            problems.append(f"its {what} names column {n[:60]!r} twice")
        elif n.startswith("__$") and n not in META_COLUMNS:
            problems.append(f"its {what} has {n[:60]!r}, which is not a change-table column ({', '.join(META_COLUMNS)})")
        elif n.startswith("__sqlcdc"):
            problems.append(f"its {what} has {n[:60]!r}, a name sqlcdc reserves")
        seen.add(n.lower())
    return "; ".join(problems) or None


def csv_header(path: str, sep: str) -> tuple[list[str] | None, str | None, str, int]:
    """``(names, problem, header text, empty lines before it)`` of a CSV export: its first record
    that is not an empty line, taken by the rule the Spark side uses (physical lines until the count
    of ``"`` is even). ``names`` and ``problem`` None: an empty file (no records at all)."""
    taken: list[str] = []
    quotes = blank = 0
    try:
        opener = gzip.open if path.lower().endswith(".gz") else bz2.open if path.lower().endswith(".bz2") else open
        # Lines end at "\n" only (a "\r" before it is stripped), as the Spark side reads them.
        with opener(path, "rt", encoding="utf-8", errors="replace", newline="\n") as fh:
            for line in fh:
                if not taken and line.rstrip("\r\n") == "":
                    blank += 1
                    continue
                taken.append(line.rstrip("\r\n"))
                quotes += line.count('"')
                if quotes % 2 == 0 or len(taken) >= 1000:
                    break
    except (OSError, EOFError, ValueError) as e:  # unreadable, truncated or not-gzip .gz, ...
        return None, f"cannot be read ({type(e).__name__}: {str(e)[:200]})", "", blank
    text = "\n".join(taken)
    if not taken:
        return None, None, "", blank
    if quotes % 2:
        return None, "cannot be read: a quote in its header line is not closed", text[:2000], blank
    try:
        names = next(csv.reader(io.StringIO(text), delimiter=sep, quotechar='"', doublequote=True, strict=True))
    except (csv.Error, StopIteration, TypeError) as e:
        return None, f"cannot be read: its header line is not CSV ({e})", text[:2000], blank
    if names:
        names[0] = names[0].lstrip("\ufeff")  # a UTF-8 byte order mark
    problem = columns_problem(names, "header")
    return names, problem and f"cannot be mapped to change-table columns: {problem}", text[:2000], blank


def parquet_schema(path: str) -> tuple[tuple | None, str | None]:
    """``(schema key, problem)`` of a Parquet export, from its footer (pyarrow: no Spark job); the key
    is ``(name, type, is text)`` per column."""
    import pyarrow.parquet as pq
    import pyarrow.types as pat

    try:
        schema = pq.read_schema(path)
    except Exception as e:  # noqa: BLE001 - whatever pyarrow raises, the file is not readable Parquet
        return None, f"is not a readable Parquet file ({type(e).__name__}: {str(e)[:200]})"
    unreadable: list[str] = []

    def walk(name: str, t) -> None:  # types Spark's Parquet reader refuses
        if pat.is_time(t) or (pat.is_timestamp(t) and t.unit == "ns"):
            unreadable.append(f"{name} ({t})")
        for i in range(getattr(t, "num_fields", 0) if pat.is_struct(t) else 0):
            walk(f"{name}.{t.field(i).name}", t.field(i).type)
        if pat.is_list(t) or pat.is_large_list(t) or pat.is_fixed_size_list(t):
            walk(f"{name}[]", t.value_type)
        if pat.is_map(t):
            walk(f"{name}{{key}}", t.key_type)
            walk(f"{name}{{value}}", t.item_type)

    for f in schema:
        walk(f.name, f.type)
    problems = [p for p in (columns_problem(list(schema.names), "schema"),) if p]
    if unreadable:
        problems.append(f"it has column(s) of a type Spark cannot read: {', '.join(unreadable)}")
    problem = "; ".join(problems)

    def text(t) -> bool:  # a column Spark reads as a string (whose bad bytes to_json would not keep)
        return pat.is_string(t) or pat.is_large_string(t) or (pat.is_dictionary(t) and text(t.value_type))

    key = tuple((f.name, str(f.type), text(f.type)) for f in schema)
    return key, problem and f"cannot be mapped to change-table columns: {problem}"


def parquet_data_problem(path: str) -> str | None:
    """Why the data of a Parquet export does not read to its end (a page that does not decompress or
    decode: Spark's read of it failed the whole source), else None. Read through once with pyarrow,
    a batch at a time; :class:`sqlcdc.formats.base.FileChecks` remembers a whole file."""
    import pyarrow.parquet as pq

    try:
        for _ in pq.ParquetFile(path).iter_batches(batch_size=1 << 16):
            pass
    except Exception as e:  # noqa: BLE001 - whatever pyarrow raises, the file's data does not read
        return f"is not a readable Parquet file: its data does not read to its end ({type(e).__name__}: {str(e)[:200]})"
    return None
