"""The hostile-record corpus of ``tests/test_hostile_records.py`` as landed files of a real pipeline.

``land(base)`` writes every case of the four producers as files, one source per producer, and
returns the sources' and tables' config text; ``check(spark, tables)`` then asserts what issue 16
asks of one ``sqlcdc run`` over them: each record in exactly its expected place (silver with its
exact values, or quarantine with a reason naming the problem), the balance of every source, the
good records in gold with their exact values (SCD1 and the current SCD2 version), and every gold
table readable by ``toPandas()``. ``snapshot(spark, tables)`` is every corpus table's rows, to show
that a run with no new files changes nothing.

``tests/test_e2e_pipeline.py`` adds these sources to its pipeline (a real run costs minutes on two
cores). As a script, to look at a run by hand::

    .venv/bin/python tests/hostile/corpus.py /tmp/hostile          # writes, runs sqlcdc run, checks
    .venv/bin/python tests/hostile/corpus.py /tmp/hostile --write-only
"""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import test_hostile_records as h  # noqa: E402  (the corpus: cases and their expected places)
from pyspark.sql import functions as F  # noqa: E402

SQLCDC = str(Path(sys.executable).parent / "sqlcdc")

#: producer -> (source name, table name, landed file name); names distinct from the e2e's own
SOURCES = {
    "debezium": ("hostile_dbz", "hostile_items", "items.json"),
    "cdc_ct": ("hostile_ct", "hostile_orders", "cdc.dbo_orders_CT.jsonl"),
    "ces": ("hostile_ces", "hostile_purchases", "part-0.json"),
    "qlik": ("hostile_qlik", "hostile_t", "part-0.jsonl"),
}


def colon_name(file: str) -> str:
    """Where the first good record of a producer lands alone: a name holding ':' (Hadoop's checksum
    file system could not open such a file, and stopped the whole run)."""
    stem, dot, ext = file.rpartition(".")
    return f"{stem}_10:00{dot}{ext}"


def damaged_files(file: str) -> dict[str, str]:
    """Files of a producer that cannot be read to their end -> what their quarantine reason says:
    a ``.gz`` cut short, in a folder below the landing (copies of the producer's first good record,
    so whatever Spark reads of it before the cut changes no gold), a ``.gz`` that is not gzip at all
    an lz4-tool file (:func:`lz4_frame`) and a file of one 80 MiB line; for CES also an ``.avro`` that is not Avro at all
    (:data:`DAMAGED_AVRO`). Each stopped the whole run (Spark's codec or
    Avro reader fails mid-file); now each is quarantined as a file."""
    stem, _, ext = file.rpartition(".")
    gz = {f"2026/12/06/{stem}_cut.{ext}.gz": ": not a whole gzip file (EOFError",  # in a folder below the landing
          f"{stem}_junk.{ext}.gz": ": not a whole gzip file (BadGzipFile",
          f"{stem}_tool.{ext}.lz4": ": not a whole Hadoop lz4 file (it is an LZ4 frame file, as the lz4 tool writes it",
          # a table dumped as one JSON array: one line of 64 MiB and more (600 MB stopped a 4 GB JVM)
          f"{stem}_one_line.{ext}": ": line 1 is longer than 64 MiB, more than sqlcdc reads as one record"}
    return gz | (DAMAGED_AVRO if file == SOURCES["ces"][2] else {})


def lz4_frame(data: bytes) -> bytes:
    """``data`` (at most 64 KiB) as the lz4 tool writes it (an LZ4 frame, one block stored
    uncompressed): Spark's ``.lz4`` codec is Hadoop's block format, which read such a file as no
    lines at all, or stopped the JVM on a small heap (2026-12-06)."""
    return b"\x04\x22\x4d\x18\x60\x40\x82" + (len(data) | 1 << 31).to_bytes(4, "little") + data + bytes(4)


def not_utf8_file(producer: str, file: str, good: str) -> tuple[str, bytes, list[str]]:
    """(name, bytes, quarantine reasons) of a file of a producer holding a line that is not UTF-8
    text (a Latin-1 byte in its first field name), then blank lines (spaces, a tab, a CR): the byte
    stopped the whole run (Arrow refused it in the first Python UDF it reached); the blank lines were
    quarantined as not JSON (Qlik; a tab everywhere) though they are no records. For CES also ``good``
    (the producer's first good record) with a Latin-1 column name in ``eventsource.cols``, for Qlik a
    metadata message of another table with one: column discovery must not take them (a metadata
    message that is not text was counted as skipped and quarantined both)."""
    stem, _, ext = file.rpartition(".")
    lines = [b'{"\xe9t\xe9": 1}']
    if producer == "ces":
        lines.append(good.encode().replace(b'\\"name\\": \\"price\\"', b'\\"name\\": \\"pr\xe9ce\\"'))
    if producer == "qlik":
        lines.append(json.dumps(h.QLIK_METADATA).encode().replace(b'"table": "t"', b'"table": "other"').replace(b'"NAME"', b'"NAM\xc9"'))
    reasons = [f"not UTF-8 text: byte {line[i]:02x} at offset {i} (invalid continuation byte)"
               for line in lines for i in [min(line.index(b) for b in (b"\xe9", b"\xc9") if b in line)]]
    return f"{stem}_latin1.{ext}", b"\n".join(lines) + b"\n\n  \n\t\n \t\r\n", reasons


#: The CES source's landed Avro container files that cannot be read: one that is not Avro, one whose
#: writer schema gives ``id`` an int (a good event's; its records all land as JSON lines), one whose
#: last block says it holds 1.5 GB (Avro's reader makes that buffer first: Spark must not open it).
DAMAGED_AVRO = {"part-0_junk.avro": ": not a whole Avro container file (no Avro magic bytes",
                "part-0_int_id.avro": " as ChangeEvent records: its Avro schema gives field id the type int, which Avro "
                                      "does not read as string; none of its records was landed",
                "part-0_huge.avro": ": not a whole Avro container file (block 2 cut short at byte "}


def event_avro(good: str, *, int_id: bool = False, huge: bool = False) -> bytes:
    """A CES Avro container file of the event ``good``; ``int_id``: its writer schema gives ``id`` an
    int; ``huge``: a block after it says it holds 1,500,000,000 bytes (the file ends 3 bytes later)."""
    import fastavro

    doc = json.loads((Path(__file__).parents[1] / "fixtures" / "ces" / "seed_changeevent.avsc").read_text())
    if int_id:
        doc["fields"] = [{**f, "type": "int"} if f["name"] == "id" else f for f in doc["fields"]]
    ev = json.loads(good)
    record = {"segmentindex": 0, "finalsegment": True, **{f["name"]: ev[f["name"]] for f in doc["fields"] if f["name"] in ev},
              "data": ev["data"].encode(), **({"id": 7} if int_id else {})}
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(doc), [record])
    # a block of one object (zig-zag 2) of 1,500,000,000 bytes (zig-zag varint), then 3 bytes
    return out.getvalue() + (b"\x02\x80\xbc\xc1\x96\x0b" + b"xyz" if huge else b"")


#: records of a producer that are neither silver nor quarantine: Qlik's metadata message is skipped
SKIPPED = {"qlik": [json.dumps(h.QLIK_METADATA)]}
#: where the pipeline words a reason otherwise than the decoder alone: its envelope check (JSON
#: Schema, schemas/*.schema.json) runs first and names the same field
PIPELINE_REASONS = {
    ("debezium", "commit_lsn a JSON number"): "$.source.commit_lsn: 123456 is not of type 'string', 'null'",
    ("debezium", "NaN literal"): "not JSON: NaN is not a JSON value",
    ("debezium", "duplicate key"): "not JSON: duplicate key 'op' in one object",
    ("debezium", "JSON nested 5000 levels"): "not JSON: JSON nested too deeply (5001 levels",
    ("debezium", "deep JSON in after"): "not JSON: JSON nested too deeply (5002 levels",
    ("debezium", "no op, 'payload' in a value"): "'op' is a required property",
    ("debezium", "op in upper case"): "$.op: 'C' is not one of ['c', 'u', 'd', 'r', 't']",
    ("debezium", "source without table"): "$.source: 'table' is a required property",
    ("debezium", "null payload beside another field"): "$.payload: None is not of type 'object'",
    ("debezium", "END without an id"): "'op' is a required property",
    ("debezium", "status COMMIT"): "'op' is a required property",
    ("debezium", "END nested 5000 levels"): "not JSON: JSON nested too deeply (5001 levels",
}
CASES_OF = {"debezium": h.DBZ_CASES, "cdc_ct": h.CT_CASES, "ces": h.CES_CASES, "qlik": h.QLIK_CASES}
KEYS = {"debezium": "id", "cdc_ct": "id", "ces": "purchase_id", "qlik": "ID"}


def _dbz_type(field: dict) -> str:
    """A Connect field of the corpus's dbo.items as a ``columns:`` type (docs/config.md)."""
    params = field.get("parameters") or {}
    if field.get("name") == h._DEC:
        return f"decimal({params['connect.decimal.precision']},{params['scale']})"
    return field.get("name") or field["type"]


def _columns_yaml(columns) -> str:
    return "columns:\n" + "".join(
        f"  - {{name: {c['name']}, type: '{c['type']}'" + (", lob: true" if c.get("lob") else "") + "}\n" for c in columns)


def land(landing: Path) -> tuple[str, dict[str, str]]:
    """Write the corpus under ``landing``; return (the ``sources:`` entries as YAML, table file name
    -> table config text)."""
    lines = {p: SKIPPED.get(p, []) + [c.record for c in cases] for p, cases in CASES_OF.items()}
    sources = ""
    for producer, (source, _, file) in SOURCES.items():
        folder = landing / source
        folder.mkdir(parents=True, exist_ok=True)
        alone = next(c.record for c in CASES_OF[producer] if c.place == "silver")
        (folder / file).write_text("\n".join(x for x in lines[producer] if x != alone) + "\n")
        (folder / colon_name(file)).write_text(alone + "\n")
        cut, junk, tool, one_line, *avro = damaged_files(file)
        (folder / cut).parent.mkdir(parents=True, exist_ok=True)
        (folder / cut).write_bytes(gzip.compress(((alone + "\n") * 50).encode())[:-40])
        (folder / junk).write_bytes(b"these bytes were meant to be gzip\n")
        (folder / tool).write_bytes(lz4_frame((alone + "\n").encode()))
        (folder / one_line).write_bytes(b"[" + b'"x", ' * (1 << 24) + b'"x"]\n')
        latin1, text, _ = not_utf8_file(producer, file, alone)
        (folder / latin1).write_bytes(text)
        for name in avro:
            (folder / name).write_bytes(event_avro(alone, int_id=True) if name.endswith("_int_id.avro") else
                                        event_avro(alone, huge=True) if name.endswith("_huge.avro") else
                                        b"these bytes were meant to be an Avro container file\n")
        # CES reads JSON lines by json_glob (default *.{json,jsonl,ndjson}): let it read .json.gz/.lz4 too;
        # and Avro files (avro_glob, default *.avro)
        options = "    options: {serialization: auto, json_glob: '*.{json,json.gz,json.lz4}'}\n" if producer == "ces" else ""
        sources += f"  {source}:\n    format: {producer}\n    landing: {folder}\n{options}"
    dbz_cols = [{"name": f["field"], "type": _dbz_type(f)} for f in h.DBZ_FIELDS]
    tables = {
        "hostile_items": "source: hostile_dbz\ntable: dbo.items\nkeys: [id]\n" + _columns_yaml(dbz_cols),
        "hostile_orders": "source: hostile_ct\ntable: dbo.orders\nkeys: [id]\n" + _columns_yaml(h.CT_COLUMNS_CONFIG),
        "hostile_purchases": "source: hostile_ces\ntable: dbo.Purchases\nkeys: [purchase_id]\n",
        "hostile_t": "source: hostile_qlik\ntable: dbo.t\n",  # keys and columns from the metadata message
    }
    return sources, {f"{name}.yml": f"name: {name}\n{body}" for name, body in tables.items()}


def write(base: Path) -> Path:
    """A pipeline of the corpus alone under ``base``; returns its config."""
    sources, tables = land(base / "landing")
    (base / "config" / "tables").mkdir(parents=True, exist_ok=True)
    (base / "config" / "pipeline.yml").write_text("name: hostile\nsources:\n" + sources)
    for name, body in tables.items():
        (base / "config" / "tables" / name).write_text(body)
    return base / "config" / "pipeline.yml"


def _from(files, column: str):
    """Rows whose ``column`` (a landed file's path) is one of ``files``."""
    out = F.lit(False)
    for name in files:
        out = out | F.col(column).endswith(name)
    return out


def _read(spark, tables: Path, name: str):
    return spark.read.format("delta").load(str(tables / name))


def check(spark, tables: Path) -> None:
    """Assert the corpus's outcome in a warehouse's ``tables`` folder (see the module docstring)."""
    for producer, (source, table, file) in SOURCES.items():
        damaged = damaged_files(file)
        bronze, silver, quarantine = (_read(spark, tables, n) for n in (f"bronze_{source}", f"silver_{table}", f"quarantine_{source}"))
        for name, reason in damaged.items():  # quarantined as a file, with the reason
            rows = [r for r in quarantine.where(F.col("bronze_file").endswith(name)).collect()
                    if (r.reason or "").startswith(f"file {name} cannot be read")]
            assert len(rows) == 1 and f"file {name} cannot be read{reason}" in rows[0].reason, f"{source}: {name}: {rows}"
        good = next(c.record for c in CASES_OF[producer] if c.place == "silver")
        latin1, _, reasons = not_utf8_file(producer, file, good)  # a quarantine row per line; a blank line is none
        rows = [(r.rules, r.reason, r.raw) for r in quarantine.where(F.col("bronze_file").endswith(latin1)).collect()]
        assert sorted(r[1] for r in rows) == sorted(reasons) and all(r[0] == ["not_utf8"] for r in rows), f"{source}: {rows}"
        assert '{"\ufffdt\ufffd": 1}' in [r[2] for r in rows], f"{source}: {rows}"  # raw: the bad bytes as U+FFFD
        assert quarantine.toPandas().shape[0] == quarantine.count(), source  # each row readable in Python
        in_bronze = [r.value for r in bronze.where(F.col("source_file").endswith(latin1) & F.is_valid_utf8("value")).collect()]
        blank = ["", "  ", "\t", " \t"] if producer == "debezium" else []  # Debezium: tombstones, skipped
        assert sorted(in_bronze) == sorted(blank), f"{source}: {in_bronze}"
        damaged = damaged | {latin1: reasons[0]}
        # the records: everything else (what Spark read of the cut file before the damage is the
        # first good record again, or its last line cut short: in silver or quarantine, as the balance says)
        bronze = bronze.where(~_from(damaged, "source_file"))
        out = h._outcomes(bronze, silver.where(~_from(damaged, "bronze_file")), [quarantine.where(~_from(damaged, "bronze_file"))])
        cases = CASES_OF[producer]
        # the balance: every landed record in exactly one place (skipped ones in none)
        landed = [r.value for r in bronze.select("value").collect()]
        assert sorted(landed) == sorted(SKIPPED.get(producer, []) + [c.record for c in cases]), source
        from_colon = bronze.where(F.col("source_file").endswith(colon_name(SOURCES[producer][2])))
        assert from_colon.count() == 1, f"{source}: the file named with ':' was not read"
        for skipped in SKIPPED.get(producer, []):
            assert skipped not in out, f"{source}: a skipped record is in {out[skipped]}"
        assert _read(spark, tables, f"dropped_{source}").count() == 0, source
        wrong = []
        for c in cases:
            places = out.get(c.record, [])
            reason = PIPELINE_REASONS.get((producer, c.kind), c.reason)
            if len(places) != 1:
                wrong.append(f"{c.kind}: in {len(places)} places: {places}")
            elif c.place == "quarantine" and (places[0][0] != "quarantine" or reason not in (places[0][1] or "")):
                wrong.append(f"{c.kind}: expected quarantine with {reason!r}, got {places[0]}")
            elif c.place == "silver" and (places[0][0] != "silver" or places[0][1].after.asDict() != c.after):
                wrong.append(f"{c.kind}: expected silver {c.after}, got {places[0]}")
        assert not wrong, f"{source}:\n" + "\n".join(wrong)
        # good records reach gold exactly: SCD1 and the open SCD2 version (each has its own key)
        key = KEYS[producer]
        good = {c.after[key]: c.after for c in cases if c.place == "silver"}
        scd1 = {r[key]: r.asDict() for r in _read(spark, tables, f"gold_{table}_scd1").collect()}
        assert scd1 == good, f"gold_{table}_scd1"
        scd2 = _read(spark, tables, f"gold_{table}_scd2")
        current = {r[key]: {k: v for k, v in r.asDict().items() if not k.startswith("__")}
                   for r in scd2.where("__END_AT IS NULL").collect()}
        assert current == good and scd2.count() == len(good), f"gold_{table}_scd2"
        for name in (f"gold_{table}_scd1", f"gold_{table}_scd2"):
            _readable_by_python_clients(spark, tables, name, len(good))


def _readable_by_python_clients(spark, tables: Path, name: str, rows: int) -> None:
    """``collect()``, delta-rs ``to_pandas()`` and Spark's ``toPandas()`` all read the table (an
    out-of-domain value, year 0 or 99999, made them raise). Spark's ``toPandas()`` always converts
    timestamps to pandas' nanoseconds (1677-09-21..2262-04-11), so it cannot hold a SQL Server
    ``datetime2`` like 9999-12-31 whatever the table: those rows are read by the other two."""
    import deltalake

    df = _read(spark, tables, name)
    assert len(df.collect()) == rows, name
    assert len(deltalake.DeltaTable(str(tables / name)).to_pandas()) == rows, name
    stamps = [f.name for f in df.schema.fields if f.dataType.typeName().startswith("timestamp")]
    in_ns = " AND ".join(f"(`{c}` IS NULL OR `{c}` BETWEEN '1677-09-22' AND '2262-04-11')" for c in stamps) or "true"
    assert len(df.where(in_ns).toPandas()) == df.where(in_ns).count(), name


def snapshot(spark, tables: Path) -> dict[str, list]:
    """Every corpus table's rows (sorted), to compare two runs."""
    names = [f"{layer}_{source}" for source, _, _ in SOURCES.values() for layer in ("bronze", "quarantine", "dropped")]
    names += [n for _, table, _ in SOURCES.values() for n in (f"silver_{table}", f"gold_{table}_scd1", f"gold_{table}_scd2")]
    return {n: sorted(map(str, _read(spark, tables, n).collect())) for n in names}


def run(config: Path, warehouse: Path) -> subprocess.CompletedProcess:
    return subprocess.run([SQLCDC, "run", "--config", str(config), "--warehouse", str(warehouse)],
                          capture_output=True, text=True, timeout=2400)


if __name__ == "__main__":
    out = Path(sys.argv[1]).resolve()
    cfg = write(out)
    print(f"corpus: {len(h.CASES)} records of four producers under {out / 'landing'}; config {cfg}")
    if "--write-only" not in sys.argv:
        res = run(cfg, out / "warehouse")
        print(res.stdout[-4000:], res.stderr[-4000:], sep="\n")
        if res.returncode == 0:
            from sqlcdc.runtime import local_spark

            check(local_spark(), out / "warehouse" / "tables")
            print("corpus check: every record in its expected place; gold exact; balances ok")
        sys.exit(res.returncode)
