"""A run killed while a stream was logging its first batch can be run again (sqlcdc.checkpoints).

Found by the e2e test's killed start (2026-12-07): the CES bronze flow had written
``offsets/.0.<uuid>.tmp`` but not renamed it to ``offsets/0`` when the run was SIGKILLed, and every
later run failed on that flow with ``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from sqlcdc import checkpoints


def _half_written(log: Path, batch: int = 0) -> list[Path]:
    """What Spark leaves in ``log`` when killed between writing an entry and renaming it."""
    log.mkdir(parents=True, exist_ok=True)
    name = f".{batch}.{uuid.uuid4()}.tmp"
    tmp, crc = log / name, log / f".{name}.crc"
    tmp.write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":1}\n{"logOffset":0}\n')
    crc.write_bytes(b"crc\0")
    return [tmp, crc]


def test_a_stream_killed_while_logging_its_first_batch_starts_again_once_cleared(spark, tmp_path):
    landing, ck, out = tmp_path / "landing", tmp_path / "ck", tmp_path / "out"
    landing.mkdir()

    def run_stream() -> None:
        (spark.readStream.format("text").load(str(landing)).writeStream.format("delta")
         .option("checkpointLocation", str(ck)).trigger(availableNow=True).start(str(out)).awaitTermination())

    run_stream()  # nothing landed yet: the checkpoint holds its metadata, no batch
    left = _half_written(ck / "offsets")
    (landing / "a.txt").write_text("x\ny\n")
    with pytest.raises(Exception, match="STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY"):
        run_stream()  # Spark's own check: a stream starting afresh needs an empty offsets log

    assert checkpoints.clear_interrupted_writes(tmp_path) == sorted(left)
    run_stream()
    assert sorted(r.value for r in spark.read.format("delta").load(str(out)).collect()) == ["x", "y"]


def test_only_unrenamed_log_entries_of_checkpoints_are_taken(tmp_path):
    flow = tmp_path / "spark_catalog" / "default" / "bronze_s" / "bronze_s" / "0"
    flow.mkdir(parents=True)
    (flow / "metadata").write_text('{"id":"q"}\n')
    left = _half_written(flow / "offsets", 3) + _half_written(flow / "commits", 2)
    for log, kept in (("offsets", ("0", ".0.crc", "3x.tmp")), ("commits", ("0", "1"))):
        for name in kept:
            (flow / log / name).write_text("v1\n")
    state = flow / "state" / "0" / "0"  # a state store's files are not a log's
    state.mkdir(parents=True)
    (state / f".1.delta.{uuid.uuid4()}.tmp").write_text("")
    elsewhere = tmp_path / "not_a_checkpoint" / "offsets"  # no metadata beside it
    _half_written(elsewhere)

    assert checkpoints.interrupted_writes(tmp_path) == sorted(left)
    assert checkpoints.clear_interrupted_writes(tmp_path) == sorted(left)
    assert sorted(p.name for p in (flow / "offsets").iterdir()) == [".0.crc", "0", "3x.tmp"]
    assert sorted(p.name for p in (flow / "commits").iterdir()) == ["0", "1"]
    assert len(list(state.iterdir())) == 1 and len(list(elsewhere.iterdir())) == 2
    assert checkpoints.interrupted_writes(tmp_path / "missing") == []


def test_sqlcdc_run_clears_them_before_the_pipeline_starts_and_says_which_flows(tmp_path, monkeypatch, capsys):
    from sqlcdc.cli import run as run_cmd
    from sqlcdc.config import load_pipeline

    (tmp_path / "in").mkdir()
    (tmp_path / "pipeline.yml").write_text("name: p\nsources:\n  s:\n    format: debezium\n    landing: in\n")
    cfg = load_pipeline(tmp_path / "pipeline.yml")
    wh = tmp_path / "wh"
    roots = wh / "_storage" / "_checkpoints"
    flow = roots / "spark_catalog" / "default" / "bronze_s" / "bronze_s" / "0"
    flow.mkdir(parents=True)
    (flow / "metadata").write_text('{"id":"q"}\n')
    _half_written(flow / "offsets")
    seen = []

    def pipeline(cmd, env, spec_path, log_path, full_refresh, quiet, spark_log=None, spark=None):
        seen.append(checkpoints.interrupted_writes(roots))
        return 0

    monkeypatch.setattr(run_cmd, "_run", pipeline)
    engine = type("E", (), {"spark": None, "remote": "sc://127.0.0.1:1", "log": None,
                            "stop_serving": lambda self: None})()
    spec = tmp_path / "state" / "spark-pipeline.yml"
    spec.parent.mkdir()
    assert run_cmd.run_pipeline(cfg, wh, engine, spec, {}) == 0
    assert seen == [[]]
    assert ("sqlcdc run: removed what an interrupted run left half-written in the checkpoints of bronze_s\n"
            in capsys.readouterr().out)


def test_gold_stream_of_silver_changes_starts_again_after_a_kill_as_it_logged_its_first_batch(spark, tmp_path):
    """Gold's own stream (sqlcdc.gold.after_run: silver's new rows, micro-batch by micro-batch, to the
    MERGE) has a checkpoint of its own: it is cleared the same way before it starts."""
    from sqlcdc.gold import after_run

    silver, state = tmp_path / "silver", tmp_path / "state"
    state.mkdir()
    spark.createDataFrame([], "id INT").write.format("delta").save(str(silver))
    got: list[int] = []
    after_run._apply_stream(spark, silver, state, lambda batch: got.extend(r.id for r in batch.collect()))
    assert got == [] and (state / "checkpoint" / "metadata").is_file()  # started, no batch logged
    left = _half_written(state / "checkpoint" / "offsets")
    spark.createDataFrame([(1,), (2,)], "id INT").write.format("delta").mode("append").save(str(silver))
    after_run._apply_stream(spark, silver, state, lambda batch: got.extend(r.id for r in batch.collect()))
    assert sorted(got) == [1, 2]
    assert not any(p.exists() for p in left)
