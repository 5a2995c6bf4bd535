"""One decoder per producer. A decoder is a module ``sqlcdc.formats.<name>`` that defines:

``NAME: str``
    the ``format`` value sources use in config (``debezium``, ``ces``, ``cdc_ct``, ``qlik``).
``STREAMING: bool``
    True when :func:`decode` is stateless row by row, so silver can be a streaming table. A
    decoder that must see several bronze rows together (pairing, reassembly) sets False and its
    silver is recomputed from bronze.
``read_bronze(spark, source) -> DataFrame``
    the (streaming) bronze read of the source's landing location; :func:`sqlcdc.formats.base.read_text_lines`
    serves formats that land one envelope per text line.
``columns_for(table, source, spark) -> list[ColumnSpec]``
    the table's typed columns, from config or discovered from the producer's own metadata.
``decode(bronze, table, columns) -> Decoded``
    bronze rows of one onboarded table -> canonical changes + quarantine rows.
``unrouted(bronze, source, tables) -> DataFrame``
    quarantine rows for bronze records no table's :func:`decode` takes (unparseable envelopes,
    tables not onboarded), so that every landed record is in silver or in quarantine.
``BRONZE_STREAMING: bool`` (optional, default True)
    False when :func:`read_bronze` returns a batch DataFrame; bronze is then a materialized view.
``keys_for(table, source, spark) -> list[str]`` (optional)
    key columns from the producer's own metadata, used when the table config gives no ``keys:``.
``is_skipped(bronze) -> Column`` (optional)
    records that are by definition not changes (Debezium tombstones); counted, not quarantined.
``waiting(bronze, source, table, reason) -> DataFrame`` (required of a decoder whose
:func:`columns_for` or ``keys_for`` raises :class:`NotYetDiscovered`)
    quarantine rows, with ``reason``, for the records of a table whose metadata has not landed.

Adding a fifth producer = one module here, one JSON Schema in ``schemas/``, one test file.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from types import ModuleType

from pyspark.sql import DataFrame

from sqlcdc.config import ConfigError

REQUIRED = ("NAME", "STREAMING", "read_bronze", "columns_for", "decode", "unrouted")


@dataclass
class Decoded:
    """What a decoder makes of one table's bronze rows."""

    changes: DataFrame
    """Canonical change rows (:data:`sqlcdc.model.CHANGE_COLUMNS`)."""
    quarantine: DataFrame
    """Rows that could not become changes (:data:`sqlcdc.model.QUARANTINE_COLUMNS`)."""


class UnknownFormat(ValueError):
    pass


class NotYetDiscovered(ConfigError):
    """A table takes its columns or keys from its producer's metadata (a Qlik metadata message,
    CES ``eventsource``), and none usable has landed yet: at-least-once transports deliver it
    after data now and then. Not a config mistake: the run goes on without the table's silver and
    gold, its records wait in quarantine with this reason (the decoder's ``waiting``), and the
    first run after the metadata lands decodes them (its silver is recomputed from bronze)."""


def available() -> list[str]:
    """Names of the decoders present in this package."""
    names = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_") or info.name == "base":
            continue
        names.append(info.name)
    return sorted(names)


def get(name: str) -> ModuleType:
    """The decoder module for format ``name``; raises :class:`UnknownFormat` naming the choices."""
    if name not in available():
        raise UnknownFormat(f"unknown producer format {name!r}; available: {', '.join(available())}")
    module = importlib.import_module(f"{__name__}.{name}")
    missing = [attr for attr in REQUIRED if not hasattr(module, attr)]
    if missing:
        raise UnknownFormat(f"decoder sqlcdc.formats.{name} lacks {', '.join(missing)}")
    return module
