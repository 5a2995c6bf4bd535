"""End to end: `sqlcdc run` (a real `spark-pipelines run`) on three producers' feeds, twice.

Each real run costs ~40 s of Spark start-up on 2 cores, so one pipeline carries every file-landed
scenario (docs/testing.md): a Debezium feed (bronze -> silver -> gold, quarantine, conservation),
the CES seed's insert/update/delete of Purchases 105 and the Qlik customers story (full load, CDC
with partial masks, a key change, a delete, tableVersion 2 adding TIER). The second run lands one new
file per source and must read only those; Debezium's carries a column added at the source (``tier``,
in its Connect schemas), which the files' table discovers, so its streaming silver is recomputed. A second Qlik source gets the full load in run 1 and its
metadata message only in run 2 (at-least-once transports reorder them): run 1 must not stop, its
data waits in quarantine, and run 2 takes it to silver and gold.
Both runs are one ``sqlcdc run --every ... --runs 2`` (``tests/watch_runs.py``): run 2 starts on Enter once the
test has checked run 1 and landed its files, in run 1's Spark, as a user's watch runs them.

The same pipeline carries issue 16's hostile corpus (tests/hostile/corpus.py: every case of
tests/test_hostile_records.py landed as files, one source per producer): run 1 must put each record
in its expected place, the good ones in gold exactly; run 2 lands nothing for those sources and
must change none of their tables (it leaves all but the CES one out: sqlcdc.cli.unchanged).

With the demo's change-table export (``samples/cdc_ct/orders``, ``config/tables/orders.yml``) the
pipeline holds every table of ``make run``'s demo (the Debezium, CES and Qlik feeds are the demo's
own), and each of their gold tables is read with delta-rs as pandas and Polars read it.

And the same Debezium, CES and Qlik events via a real Kafka broker (``tests/kafka_broker.py``), all
produced before run 1, with a fourth topic of 660 Debezium events read 110 per micro-batch: before
run 1 the pipeline is started once and SIGKILLed as soon as that topic's bronze has committed, so run
1 is the rerun of a killed run (for every source). After run 2 each producer's Kafka gold equals the
gold of its files (which landed over two runs), CES and Qlik columns discovered from the topics, the
balances hold for the Kafka sources, and the killed topic lost nothing and duplicated nothing.
(Until 2026-12-06 this was a pipeline of its own in ``tests/test_kafka.py``, with three more file
sources to compare with: each real run costs minutes of start-up and planning on 2 cores.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import functions as F

import interpreted
from debezium_events import customer, event, line, lsn
from hostile import corpus
from kafka_broker import dbz_value, produce, wait_until
from watch_runs import WatchRuns

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples" / "debezium" / "inventory"
SQLCDC = str(Path(sys.executable).parent / "sqlcdc")
SEEDS_CES = Path(__file__).resolve().parent / "fixtures" / "ces"
QLIK = Path(__file__).resolve().parent / "fixtures" / "qlik" / "customers"

pytestmark = pytest.mark.e2e


def table(spark, warehouse: Path, name: str):
    return spark.read.format("delta").load(str(warehouse / "tables" / name))


def ces_line(name: str) -> str:
    """A seed example (tests/fixtures/ces/seed_*.json, verbatim from the seed page) as one JSON line."""
    return " ".join(line.strip() for line in (SEEDS_CES / f"seed_{name}.json").read_text().splitlines())


#: Kafka topics of the Debezium, CES and Qlik events, and of the many events a killed run reads.
TOPICS = {"stream": "server1.dbo.customers.e2e", "ces_stream": "ces.purchases", "qlik_stream": "qlik.customers",
          "killed": "server1.dbo.customers.kill"}
#: Debezium on Kafka needs its columns (no schema envelope to discover them from).
DBZ_COLUMNS = "columns:\n" + "".join(f"  - {{name: {n}, type: {t}}}\n" for n, t in (
    ("id", "int32"), ("first_name", "string"), ("last_name", "string"), ("email", "string"), ("tier", "string")))
KILLED_KEYS = 300


def kafka_sources(bootstrap: str) -> str:
    def stream(name: str) -> str:
        return f"    kafka:\n      bootstrap_servers: {bootstrap}\n      topic: {TOPICS[name]}\n"

    return (f"  stream:\n    format: debezium\n{stream('stream')}"
            f"  ces_stream:\n    format: ces\n    options: {{serialization: json}}\n{stream('ces_stream')}"
            f"  qlik_stream:\n    format: qlik\n{stream('qlik_stream')}"
            f"  killed:\n    format: debezium\n{stream('killed')}"
            "      options: {maxOffsetsPerTrigger: 110}\n")  # 6 micro-batches: room to be killed mid-way


def inventory_text(name: str) -> str:
    """The demo's Debezium file ``name``; ``002-changes.json`` as the connector writes it after
    ``ALTER TABLE customers ADD tier`` and a new capture instance: ``tier`` in each event's Connect
    schema and images (1005 becomes "gold"). The files' table discovers its columns, so run 2 gains
    one: ``sqlcdc run`` drops silver_customers and its stream progress (a streaming table's struct
    cannot change in place), and SDP streams all of bronze into it again."""
    text = (SAMPLES / name).read_text()
    if name != "002-changes.json":
        return text
    out = []
    for raw in text.splitlines():
        if raw.strip():
            ev = json.loads(raw)
            for f in ev["schema"]["fields"]:
                if f["field"] in ("before", "after"):
                    f["fields"].append({"type": "string", "optional": True, "field": "tier"})
            for image, tier in (("before", None), ("after", "gold")):
                if ev["payload"][image] is not None:
                    ev["payload"][image]["tier"] = tier
            raw = json.dumps(ev)
        out.append(raw)
    return "\n".join(out) + "\n"


def produce_all(spark, bootstrap: str) -> dict[int, str]:
    """Every event of the file sources' two runs, and the killed topic's; returns its expected SCD1."""
    dbz = [v for name in sorted(p.name for p in SAMPLES.glob("*.json"))
           for v in map(dbz_value, inventory_text(name).splitlines())]
    produce(spark, bootstrap, TOPICS["stream"], dbz)
    produce(spark, bootstrap, TOPICS["ces_stream"], [ces_line(n) for n in ("insert", "update", "delete")])
    produce(spark, bootstrap, TOPICS["qlik_stream"],
            [x for f in sorted(QLIK.glob("*.jsonl")) for x in f.read_text().splitlines() if x.strip()])
    values, expected = many_events(KILLED_KEYS)
    assert len(values) == 660
    produce(spark, bootstrap, TOPICS["killed"], values)
    return expected


def many_events(n_keys: int) -> tuple[list[str], dict[int, str]]:
    """Per key k: create (v0), update (v1); every 5th key is then deleted. Returns (values, expected SCD1)."""
    out, expected = [], {}
    for k in range(1, n_keys + 1):
        c0, c1 = customer(k, f"n{k}", "v0"), customer(k, f"n{k}", "v1")
        out.append(line(event("c", after=c0, commit_lsn=lsn(0x100 + k, 1, 1), change_lsn=lsn(0x100 + k, 1, 1))))
        out.append(line(event("u", before=c0, after=c1, commit_lsn=lsn(0x100 + k, 2, 1), change_lsn=lsn(0x100 + k, 2, 1),
                              serial=2)))
        if k % 5 == 0:
            out.append(line(event("d", before=c1, commit_lsn=lsn(0x100 + k, 3, 1), change_lsn=lsn(0x100 + k, 3, 1))))
        else:
            expected[k] = "v1"
    return out, expected


def killed_run(config: Path, warehouse: Path, log_file: Path) -> None:
    """Start `sqlcdc run` and SIGKILL it (with its `spark-pipelines` and Spark) once the killed topic's
    bronze has committed a micro-batch."""
    with log_file.open("w") as log:
        proc = subprocess.Popen([SQLCDC, "run", "--config", str(config), "--warehouse", str(warehouse), "--no-summary",
                                 *interpreted.run_args()], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_until(lambda: _bronze_has_committed(warehouse, "bronze_killed") or proc.poll() is not None, 900,
                       "bronze to start")
            assert proc.poll() is None, "the run ended before it could be killed mid-run"
            os.killpg(proc.pid, signal.SIGKILL)  # the whole group: sqlcdc, spark-pipelines, the Spark JVM
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=120)
    assert "Run is COMPLETED" not in log_file.read_text()


def _bronze_has_committed(wh: Path, table: str) -> bool:
    log = wh / "tables" / table / "_delta_log"
    if not log.is_dir():
        return False
    return any('"STREAMING UPDATE"' in p.read_text() for p in log.glob("*.json"))


def table_rows(df, drop=()):
    cols = [c for c in df.columns if c not in drop]
    return sorted((tuple(r) for r in df.select(*cols).collect()), key=repr)


def write_config(base: Path, dbz: Path, ces: Path, qlik: Path, qlik_late: Path, bootstrap: str) -> Path:
    (base / "tables").mkdir(parents=True)
    hostile_sources, hostile_tables = corpus.land(dbz.parent / "hostile")
    erp = shutil.copytree(ROOT / "samples" / "cdc_ct" / "orders", dbz.parent / "erp")  # the demo's export
    (base / "pipeline.yml").write_text(
        "name: e2e\nsources:\n"
        f"  inventory:\n    format: debezium\n    landing: {dbz}\n"
        f"  ces_src:\n    format: ces\n    landing: {ces}\n    options: {{serialization: json}}\n"
        f"  crm:\n    format: qlik\n    landing: {qlik}\n"
        f"  crm_late:\n    format: qlik\n    landing: {qlik_late}\n"
        f"  erp:\n    format: cdc_ct\n    landing: {erp}\n" + hostile_sources + kafka_sources(bootstrap)
    )
    for name, source, table, extra in (("customers_kafka", "stream", "dbo.customers", "keys: [id]\n" + DBZ_COLUMNS),
                                       ("purchases_kafka", "ces_stream", "dbo.Purchases", "keys: [purchase_id]\n"),
                                       ("crm_kafka", "qlik_stream", "dbo.customers", ""),  # columns and keys discovered
                                       ("customers_killed", "killed", "dbo.customers", "keys: [id]\n" + DBZ_COLUMNS)):
        (base / "tables" / f"{name}.yml").write_text(f"source: {source}\ntable: {table}\nname: {name}\n{extra}")
    shutil.copy(ROOT / "config" / "tables" / "orders.yml", base / "tables" / "orders.yml")  # the demo's
    for name, body in hostile_tables.items():
        (base / "tables" / name).write_text(body)
    (base / "tables" / "customers.yml").write_text("source: inventory\ntable: dbo.customers\nkeys: [id]\n")
    (base / "tables" / "purchases.yml").write_text("source: ces_src\ntable: dbo.Purchases\nkeys: [purchase_id]\n")
    # keys from Qlik's metadata message
    (base / "tables" / "crm_customers.yml").write_text("source: crm\ntable: dbo.customers\nname: crm_customers\n")
    (base / "tables" / "late_customers.yml").write_text("source: crm_late\ntable: dbo.customers\nname: late_customers\n")
    return base / "pipeline.yml"


def test_three_producers_two_runs_bronze_silver_gold_quarantine(spark, broker, tmp_path, request):
    dbz_in, ces_in, qlik_in, late_in = (tmp_path / "landing" / n for n in ("dbz", "ces", "qlik", "qlik_late"))
    for d in (dbz_in, ces_in, qlik_in, late_in):
        d.mkdir(parents=True)
    config = write_config(tmp_path / "config", dbz_in, ces_in, qlik_in, late_in, broker.bootstrap)
    wh = tmp_path / "warehouse"
    killed_scd1 = produce_all(spark, broker.bootstrap)  # every Kafka event, before any run

    # --- run 1: Debezium snapshot + changes; CES insert + update; Qlik metadata v1 + full load -----
    for name in ("000-snapshot.json", "001-changes.json"):
        shutil.copy(SAMPLES / name, dbz_in / name)
    (ces_in / "a.json").write_text(ces_line("insert") + "\n" + ces_line("update") + "\n")
    for name in ("01_metadata_v1.jsonl", "02_full_load.jsonl"):
        shutil.copy(QLIK / name, qlik_in / name)
    shutil.copy(QLIK / "02_full_load.jsonl", late_in / "02_full_load.jsonl")  # its metadata comes in run 2
    # a run killed mid-way (its Kafka bronze committed, the rest wherever it was), then run 1
    killed_run(config, wh, tmp_path / "killed-run.log")
    partial = table(spark, wh, "bronze_killed").count()
    assert 0 < partial < 660
    runs = WatchRuns(config, wh, 2, "--no-summary", *interpreted.run_args(), timeout=2400)
    request.addfinalizer(runs.stop)
    code, first = runs.run()
    assert code == 0, first[-6000:]
    assert "Run is COMPLETED" in first

    # Debezium: 13 records landed: 4 snapshot rows; 6 changes, 1 tombstone, 2 bad records in 001.
    assert table(spark, wh, "bronze_inventory").count() == 13
    assert table(spark, wh, "silver_customers").count() == 10
    q = table(spark, wh, "quarantine_inventory").collect()
    # invalid envelopes, explained by jsonschema with the JSON path (schemas/debezium-envelope.schema.json)
    assert sorted(r.reason for r in q) == [
        "envelope (debezium-envelope.schema.json): $.payload.op: 'x' is not one of ['c', 'u', 'd', 'r', 't']",
        "envelope (debezium-envelope.schema.json): not JSON: Expecting ',' delimiter: line 1 column 46 (char 45)",
    ]
    assert all(r.bronze_file.endswith("001-changes.json") for r in q)
    scd1 = {r.id: (r.first_name, r.last_name, r.email) for r in table(spark, wh, "gold_customers_scd1").collect()}
    assert scd1 == {
        1001: ("sally", "thomas", "sally@acme.example"),
        1003: ("edward", "walker", "edward.walker@example.org"),
        1004: ("anne", "kretchmar-lee", "anne.kretchmar-lee@example.org"),
        1005: ("john", "doe", "john.doe@example.org"),
        1012: ("george", "bailey", "george.bailey@example.org"),  # 1002 changed its key to 1012
    }
    first_silver_ids = {r.change_id for r in table(spark, wh, "silver_customers").collect()}
    # CES: the update's current image
    purchases = table(spark, wh, "gold_purchases_scd1").collect()
    assert [(r.purchase_id, r.product_name, r.price_per_item, r.quantity) for r in purchases] == [(105, "Game 2066", 50, 2)]
    # Qlik: tableVersion 1, no TIER yet
    customers = table(spark, wh, "gold_crm_customers_scd1")
    assert customers.columns == ["ID", "NAME", "EMAIL", "BALANCE"]
    assert sorted((r.ID, r.NAME) for r in customers.collect()) == [(1, "Alice"), (2, "Bob"), (3, "Carol")]
    # Qlik data before its metadata: no silver or gold yet, its three rows in quarantine saying why
    assert not (wh / "tables" / "silver_late_customers").exists() and not (wh / "tables" / "gold_late_customers_scd1").exists()
    waiting = table(spark, wh, "quarantine_crm_late").collect()
    # the bare message names dbo.customers: it waits for its table's metadata; the two atMSG-wrapped
    # ones name their table only by externalSchemaId, which no metadata message defines yet
    named = [r for r in waiting if r.table_name == "late_customers"]
    assert len(named) == 1 and named[0].rules == ["waiting"]
    assert named[0].reason.startswith("waiting for metadata: ") and "no Qlik metadata message for dbo.customers" in named[0].reason
    unnamed = [r for r in waiting if r.table_name is None]
    assert len(unnamed) == 2 and all(r.rules == ["routing"] and "externalSchemaId (s-cust-1) matches no metadata"
                                     in r.reason for r in unnamed)
    # the hostile corpus: every record in its place, good ones in gold exactly, gold readable by Python
    corpus.check(spark, wh / "tables")
    hostile_tables = corpus.snapshot(spark, wh / "tables")

    # --- run 2: one new file per source; each source reads only it ------------------------------
    (dbz_in / "002-changes.json").write_text(inventory_text("002-changes.json"))  # tier added at the source
    (ces_in / "b.json").write_text(ces_line("delete") + "\n")
    shutil.copy(QLIK / "03_cdc.jsonl", qlik_in / "03_cdc.jsonl")  # with the tableVersion 2 metadata mid-file
    shutil.copy(QLIK / "01_metadata_v1.jsonl", late_in / "01_metadata_v1.jsonl")
    code, second = runs.run()  # Enter: in the Spark of run 1, warm
    finished, rest = runs.finish()  # the command stops after run 2
    second += rest
    assert code == 0 and finished == 0, second[-6000:]
    # sources with nothing new are left out of the run (sqlcdc.cli.unchanged); CES runs every time
    # (its split segments time out by the clock), so the hostile CES source is recomputed
    assert "nothing new for erp, hostile_dbz, hostile_ct, hostile_qlik since the last run" in second
    assert corpus.snapshot(spark, wh / "tables") == hostile_tables  # nothing new landed for them: unchanged
    # Qlik's tableVersion 2 adds TIER: the run drops crm_customers' views while the pipeline is
    # defined, and SDP creates them again in the same start (sqlcdc.reshape)
    rebuilt = [ln for ln in second.splitlines() if "changed (added TIER): rebuilding" in ln]
    assert len(rebuilt) == 1 and rebuilt[0].startswith("sqlcdc run: the columns of dbo.customers changed"), second[-3000:]
    assert rebuilt[0].endswith("silver_crm_customers") and "decoded_" in rebuilt[0]
    assert second.count("starting the pipeline") == 1
    # Debezium's envelopes of 002 carry tier: silver_customers is streamed from bronze again
    assert ("sqlcdc run: the columns of dbo.customers changed (added tier): silver_customers is recomputed "
            "from bronze") in second, second[-3000:]

    bronze = table(spark, wh, "bronze_inventory")
    assert bronze.count() == 16
    assert bronze.where(bronze.source_file.endswith("002-changes.json")).count() == 3
    silver = table(spark, wh, "silver_customers").collect()
    new = [r for r in silver if r.change_id not in first_silver_ids]
    assert len(silver) == 12 and len(new) == 2
    assert all(r.bronze_file.endswith("002-changes.json") for r in new)
    assert {r.op for r in new} == {"DELETE", "UPDATE"}

    scd1 = {r.id: (r.first_name, r.tier) for r in table(spark, wh, "gold_customers_scd1").collect()}
    assert scd1 == {1001: ("sally", None), 1004: ("anne", None), 1005: ("johnny", "gold"), 1012: ("george", None)}
    versions = {}
    for r in table(spark, wh, "gold_customers_scd2").collect():
        versions.setdefault(r.id, []).append((r.first_name, r.last_name, r["__END_AT"] is None))
    assert {k: sorted(v) for k, v in versions.items()} == {
        1001: [("sally", "thomas", False), ("sally", "thomas", True)],  # email changed
        1002: [("george", "bailey", False)],
        1003: [("edward", "walker", False)],
        1004: [("anne", "kretchmar", False), ("anne", "kretchmar-lee", True)],
        1005: [("john", "doe", False), ("johnny", "doe", True)],
        1012: [("george", "bailey", True)],
    }

    # Conservation: every landed Debezium record is in silver, in quarantine, or a skipped tombstone.
    silver_records = {r.bronze_record_id for r in silver}
    quarantined = {r.bronze_record_id for r in table(spark, wh, "quarantine_inventory").collect()}
    tombstones = {r.record_id for r in bronze.where("trim(value) = '' OR trim(value) = 'null'").collect()}
    landed = {r.record_id for r in bronze.collect()}
    assert len(tombstones) == 2
    assert landed == silver_records | quarantined | tombstones
    assert not (silver_records & quarantined)

    # CES: deleted; SCD2 holds the two closed versions, cut at the seed's commit LSNs
    assert table(spark, wh, "gold_purchases_scd1").count() == 0
    history = sorted(
        (r.product_name, r["__START_AT"].commit_lsn, r["__END_AT"].commit_lsn)
        for r in table(spark, wh, "gold_purchases_scd2").collect()
    )
    assert history == [
        ("Game 2066", "0000002C000003500004", "0000002C000003600019"),  # update .. delete
        ("Game 2077", "0000002C00000300017C", "0000002C000003500004"),  # insert .. update
    ]
    # Qlik: masks, a provided NULL, tableVersion 2, a key change
    current = sorted(
        (r.ID, r.NAME, r.EMAIL, str(r.BALANCE), r.TIER) for r in table(spark, wh, "gold_crm_customers_scd1").collect()
    )
    assert current == [
        (1, "Alicia", "a@x.org", "10.00", "silver"),  # columnMask left EMAIL/BALANCE untouched
        (2, "Bob", None, "25.50", None),  # a provided NULL set EMAIL to NULL
        (5, "Eve", "e@x.org", "50.00", "gold"),  # inserted after tableVersion 2
        (30, "Carol", "c@x.org", "30.00", None),  # key 3 -> 30: the old key is gone
    ]
    # the late metadata landed: the waiting rows are decoded, quarantine is empty
    assert sorted((r.ID, r.NAME) for r in table(spark, wh, "gold_late_customers_scd1").collect()) == [
        (1, "Alice"), (2, "Bob"), (3, "Carol")]
    assert table(spark, wh, "silver_late_customers").count() == 3
    assert table(spark, wh, "quarantine_crm_late").count() == 0
    scd2 = table(spark, wh, "gold_crm_customers_scd2")
    assert scd2.count() == 9
    assert scd2.where("ID = 4 AND __END_AT IS NOT NULL").count() == 1  # Dan: inserted, then deleted

    # conservation per source: landed = silver + quarantine + skipped (Qlik metadata messages)
    for src, silver_name, skipped, landed_n in (("ces_src", "silver_purchases", 0, 3), ("crm", "silver_crm_customers", 2, 12)):
        n_landed = table(spark, wh, f"bronze_{src}").count()
        n_silver = table(spark, wh, silver_name).count()
        n_quarantined = table(spark, wh, f"quarantine_{src}").count()
        assert (n_landed, n_silver + n_quarantined + skipped) == (landed_n, landed_n)

    # Kafka: every event was produced before run 1, the files landed over two runs; same gold, and the
    # balance holds for every source (tombstones are null Kafka values, skipped as blank lines are)
    from sqlcdc.config import load_pipeline
    from sqlcdc.summary import balances

    got = {b.source: (b.landed, b.in_silver, b.quarantined, b.skipped, b.ok) for b in balances(spark, load_pipeline(config), wh)}
    assert all(ok for *_, ok in got.values()), got
    assert got["stream"] == got["inventory"] == (16, 12, 2, 2, True)
    assert got["ces_stream"] == got["ces_src"] == (3, 3, 0, 0, True)
    assert got["qlik_stream"] == got["crm"] == (12, 10, 0, 2, True)
    assert got["killed"] == (660, 660, 0, 0, True)
    via_kafka = table(spark, wh, "bronze_stream")
    assert via_kafka.where(~F.col("source_file").startswith(f"kafka://{TOPICS['stream']}/0/")).count() == 0
    lineage = ("bronze_record_id", "bronze_file", "bronze_ingest_time", "ingest_time", "table_name")
    assert table_rows(table(spark, wh, "silver_customers"), lineage) == table_rows(table(spark, wh, "silver_customers_kafka"), lineage)
    for files_t, kafka_t in (("customers", "customers_kafka"), ("purchases", "purchases_kafka"), ("crm_customers", "crm_kafka")):
        for scd in ("scd1", "scd2"):
            a, b = table(spark, wh, f"gold_{files_t}_{scd}"), table(spark, wh, f"gold_{kafka_t}_{scd}")
            assert a.columns == b.columns, (files_t, scd)
            assert table_rows(a, lineage) == table_rows(b, lineage), (files_t, scd)
    # the killed topic: every offset once in bronze, every change once in silver, gold as expected
    killed = table(spark, wh, "bronze_killed")
    assert sorted(r.offset for r in killed.select("offset").collect()) == list(range(660))
    killed_silver = table(spark, wh, "silver_customers_killed")
    counts = killed_silver.agg(F.count("*").alias("rows"), F.countDistinct("change_id").alias("ids"),
                               *(F.count_if(F.col("op") == op).alias(op) for op in ("INSERT", "UPDATE", "DELETE")))
    # one query; the three ops add up to the rows, so no other op is there
    assert counts.first().asDict() == {"rows": 660, "ids": 660, "INSERT": 300, "UPDATE": 300, "DELETE": 60}
    scd1 = {r.id: r.last_name for r in table(spark, wh, "gold_customers_killed_scd1").collect()}
    assert scd1 == killed_scd1 and len(scd1) == 240
    scd2 = table(spark, wh, "gold_customers_killed_scd2").collect()
    assert len(scd2) == 2 * KILLED_KEYS  # v0 and v1 of every key
    assert sum(1 for r in scd2 if r["__END_AT"] is None) == 240  # open versions: keys not deleted

    # Every gold table opens outside Spark: delta-rs (what pandas and Polars use) reads the same rows.
    import deltalake

    gold = sorted(p.name for p in (wh / "tables").iterdir()
                  if p.name.startswith("gold_") and "__" not in p.name and not p.name.startswith("gold_hostile_"))
    demo = {f"gold_{t}_scd{n}" for t in ("customers", "orders", "purchases", "crm_customers") for n in (1, 2)}
    assert len(gold) == 18 and demo <= set(gold)  # the demo's eight, the late Qlik source's two, Kafka's eight
    # the demo's change-table export: 21 records (update pairs are two), 14 changes, as `make run` shows
    assert (table(spark, wh, "bronze_erp").count(), table(spark, wh, "silver_orders").count(),
            table(spark, wh, "quarantine_erp").count()) == (21, 14, 0)
    assert (table(spark, wh, "gold_orders_scd1").count(), table(spark, wh, "gold_orders_scd2").count()) == (3, 12)
    for name in gold:
        via_rs = deltalake.DeltaTable(str(wh / "tables" / name)).to_pandas()
        via_spark = table(spark, wh, name)
        assert list(via_rs.columns) == via_spark.columns, name
        key = via_spark.columns[0]  # the tables' first key column (id, purchase_id, ID)
        assert sorted(via_rs[key].tolist()) == sorted(r[0] for r in via_spark.select(key).collect()), name


def test_a_broken_config_stops_before_spark_starts(tmp_path):
    base = tmp_path / "config"
    (base / "tables").mkdir(parents=True)
    (base / "pipeline.yml").write_text("name: e2e\nsources:\n  inventory:\n    format: debezium\n    landing: x\n")
    (base / "tables" / "orders.yml").write_text("source: inventory\ntable: dbo.orders\nkeys: id\nscd_types: [3]\n")
    res = subprocess.run([SQLCDC, "run", "--config", str(base / "pipeline.yml"), "--warehouse", str(tmp_path / "wh")],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 2
    assert "orders.yml:3: keys:" in res.stderr and "orders.yml:4: scd_types[0]:" in res.stderr
    assert not (tmp_path / "wh").exists()
