"""What a killed run leaves in the streaming checkpoints, cleared before the next run starts.

Spark writes each entry of a stream's offset and commit logs (``offsets/<batch>``,
``commits/<batch>``) to a temporary file beside it, ``.<batch>.<uuid>.tmp`` (with Hadoop's
``..<batch>.<uuid>.tmp.crc``), then renames it. A run killed between the two (SIGKILL, the machine
stopping, Ctrl-C twice) leaves the temporary file. Spark ignores it when the stream resumes from a
logged batch, but not when the stream has no batch logged yet: since Spark 4.1 a stream starting
afresh requires ``offsets/``, ``commits/`` and ``state/`` to be empty
(``spark.sql.streaming.verifyCheckpointDirectoryEmptyOnStart``) and fails with
``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``. So a run killed while any of its streaming flows
was logging its first batch could not be run again, whatever was delivered -- found by
``tests/test_e2e_pipeline.py``'s killed start on 2026-12-07, on a CES bronze flow.

``sqlcdc run`` removes those temporary files before it starts the pipeline (no other writer is
running then: the warehouse is the run's), and gold's own stream of silver changes
(:mod:`sqlcdc.gold.after_run`) before it starts. The check itself stays on, for what it is for: a
checkpoint that holds a logged batch of another query.

Example::

    removed = checkpoints.clear_interrupted_writes(checkpoints.of_pipeline(warehouse))
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["STORAGE", "clear_interrupted_writes", "interrupted_writes", "of_pipeline"]

#: The pipeline's storage folder in a local run's warehouse (the SDP spec's ``storage``).
STORAGE = "_storage"

#: The logs of a streaming checkpoint whose entries are written through a temporary file.
LOGS = ("offsets", "commits")
_TEMP = re.compile(r"\.\.?\d+\.[0-9a-fA-F-]{36}\.tmp(\.crc)?")


def of_pipeline(warehouse: Path) -> Path:
    """Where SDP keeps the checkpoints of ``sqlcdc run``'s flows: ``<table>/<flow>/<n>`` below."""
    return warehouse / STORAGE / "_checkpoints"


def interrupted_writes(checkpoints: Path) -> list[Path]:
    """The temporary files of log entries never renamed, in every streaming checkpoint under
    ``checkpoints`` (a checkpoint is a folder with a ``metadata`` file), sorted."""
    if not checkpoints.is_dir():
        return []
    found = []
    for meta in checkpoints.rglob("metadata"):
        if not meta.is_file():
            continue
        for log in LOGS:
            folder = meta.parent / log
            if folder.is_dir():
                found += [p for p in folder.iterdir() if p.is_file() and _TEMP.fullmatch(p.name)]
    return sorted(found)


def clear_interrupted_writes(checkpoints: Path) -> list[Path]:
    """Remove :func:`interrupted_writes` and return them. Call only while no stream writes there."""
    removed = interrupted_writes(checkpoints)
    for path in removed:
        path.unlink(missing_ok=True)
    return removed
