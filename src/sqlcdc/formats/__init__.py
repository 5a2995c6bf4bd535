"""One decoder per producer: a subclass of :class:`Decoder` in ``sqlcdc.formats.<name>``, whose
instance is that module's ``DECODER``. :func:`get` returns it; :func:`available` lists the names.

Required of every decoder (abstract here): its ``name`` (the ``format`` value in config), ``label``,
``streaming``, and :meth:`~Decoder.read_bronze`, :meth:`~Decoder.columns_for`,
:meth:`~Decoder.decode`, :meth:`~Decoder.unrouted`. Every other hook has a default that holds
for a producer without the feature (no key discovery, nothing skipped, every record accounted for
by its own row, no duplicates, no unknown types), so callers never probe for one.

>>> from sqlcdc import formats
>>> formats.get("debezium").streaming
True
>>> formats.get("oracle")
Traceback (most recent call last):
...
sqlcdc.formats.UnknownFormat: unknown producer format 'oracle'; available: cdc_ct, ces, debezium, debezium_flat, qlik

Adding a fifth producer = one module here (a :class:`Decoder` subclass and ``DECODER``), one JSON
Schema in ``schemas/``, one test file. Or, without touching sqlcdc, a module of another installed
package named by an entry point of :data:`ENTRY_POINT_GROUP` (its ``envelope_schema`` may then be
an absolute path beside it). Config loading takes the ``format`` values from :func:`available`;
the config schema file's ``format`` enum lists the built-in ones, for editors.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, ClassVar, Iterable, Literal, Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlcdc import frames, model
from sqlcdc.config import ConfigError, SourceConfig, TableConfig
from sqlcdc.values import ColumnSpec

__all__ = ["ENTRY_POINT_GROUP", "Decoded", "Decoder", "NotYetDiscovered", "UnknownFormat", "available", "get"]


@dataclass(frozen=True)
class Decoded:
    """What a decoder makes of one table's bronze rows.

    A decoder whose changes and rejects come from one frame builds this with :meth:`split`, which
    also keeps that frame: the pipeline's quarantine flow then checks the table's expectations on
    the same decode instead of a second copy of it (:func:`sqlcdc.expectations.quarantine_of`)."""

    changes: DataFrame
    """Canonical change rows (:data:`sqlcdc.model.CHANGE_COLUMNS`)."""
    quarantine: DataFrame
    """Rows that could not become changes (:data:`sqlcdc.model.QUARANTINE_COLUMNS`)."""
    rows: DataFrame | None = None
    """Optional (:meth:`split`): every decoded row, with the boolean ``_decoded`` (a change)."""
    change: tuple[Column, ...] = ()
    """With ``rows``: the change-row columns over ``rows`` (what ``changes`` selects)."""
    rejected: tuple[Column, ...] = ()
    """With ``rows``: the quarantine-row columns over ``rows`` (what ``quarantine`` selects)."""

    @classmethod
    def split(cls, rows: DataFrame, decoded: Column, change: Iterable[Column], rejected: Iterable[Column]) -> "Decoded":
        """``rows`` where ``decoded`` is true become ``change`` columns, the others ``rejected`` ones.

        >>> # Decoded.split(typed, F.size("_reasons") == 0, model.change_row(...), model.quarantine_row(...))
        """
        rows = rows.select("*", F.coalesce(decoded, F.lit(False)).alias("_decoded"))
        change, rejected = tuple(change), tuple(rejected)
        return cls(frames.where(rows, F.col("_decoded"), "_good").select(*change),
                   frames.where(rows, ~F.col("_decoded"), "_bad").select(*rejected), rows, change, rejected)


class UnknownFormat(ValueError):
    """A ``format`` no decoder of this package reads (the message lists those that exist)."""


class NotYetDiscovered(ConfigError):
    """A table takes its columns or keys from its producer's metadata (a Qlik metadata message,
    CES ``eventsource``), and none usable has landed yet: at-least-once transports deliver it
    after data now and then. Not a config mistake: the run goes on without the table's silver and
    gold, its records wait in quarantine with this reason (the decoder's ``waiting``), and the
    first run after the metadata lands decodes them (its silver is recomputed from bronze)."""


class Decoder(ABC):
    """How one producer's landed records become bronze, and bronze rows become canonical changes.

    Class attributes (``name``, ``label``, ``streaming`` required; the rest default):

    ``name``
        the ``format`` value sources use in config (``debezium``, ``ces``, ``cdc_ct``, ``qlik``).
    ``label``
        the producer as people name it (``SQL Server (Debezium)``): dlt-meta's ``source_system``.
    ``streaming``
        True when :meth:`decode` is stateless row by row, so silver can be a streaming table. A
        decoder that must see several bronze rows together (pairing, reassembly) sets False and
        its silver is recomputed from bronze each run.
    ``bronze_streaming``
        False when :meth:`read_bronze` returns a batch frame; bronze is then a materialized view.
    ``envelope_schema``
        a JSON Schema file in ``schemas/`` that sqlcdc checks every envelope against before
        :meth:`decode` (failures are quarantined with the schema's reason); None when the decoder
        checks its envelopes itself.
    ``keys_required`` / ``columns_required``
        why a table config of this producer must name its ``keys:`` / ``columns:`` (the producer's
        records do not carry them), or None; ``sqlcdc validate`` reports their absence.
    ``position_field``
        the producer's field giving a change's own place in the SQL Server log beside its commit
        LSN (Debezium ``source.change_lsn``, change tables ``__$seqval``), or None when its changes
        carry none: such a producer cannot share a table with another (``sources:``, see
        :mod:`sqlcdc.gold.handoff`), as a change both deliver could not be told from two changes.
    ``options``
        the producer's ``options:`` (in a source, or a table overriding it): option name -> JSON
        Schema of its value, with a description. Config loading refuses an option not named here,
        or a value of the wrong type, with file and line (default: the producer takes none).
    ``transaction_end``
        how :meth:`transaction_marks` tell where a transaction ends: ``"last"`` (default) -- a
        record says it is the last one (Qlik); ``"later_commit"`` -- none does, so a transaction is
        taken as complete once a later commit of the source has landed, and only when the
        pipeline's ``transactions.later_commit`` says so (CES).
    ``depends_on_time``
        True when what :meth:`decode` gives can change with the clock alone (CES: split segments
        are quarantined once ``split_timeout`` has passed): ``sqlcdc run`` then runs the source
        even when nothing new landed (:mod:`sqlcdc.cli.unchanged`). Default False.
    """

    name: ClassVar[str]
    label: ClassVar[str]
    streaming: ClassVar[bool]
    bronze_streaming: ClassVar[bool] = True
    envelope_schema: ClassVar[str | None] = None
    keys_required: ClassVar[str | None] = None
    columns_required: ClassVar[str | None] = None
    options: ClassVar[Mapping[str, Mapping[str, Any]]] = MappingProxyType({})
    position_field: ClassVar[str | None] = None
    transaction_end: ClassVar[Literal["last", "later_commit"]] = "last"
    depends_on_time: ClassVar[bool] = False

    # --- required ----------------------------------------------------------------------------------

    @abstractmethod
    def read_bronze(self, spark: SparkSession, source: SourceConfig, *, streaming: bool = True) -> DataFrame:
        """The source's landing location as bronze rows ``record_id, value, source_file, ingest_time``
        (:func:`sqlcdc.formats.base.read_text_lines` serves one envelope per text line)."""

    @abstractmethod
    def columns_for(self, table: TableConfig, source: SourceConfig, spark: SparkSession | None = None) -> list[ColumnSpec]:
        """The table's typed columns, from config or the producer's own metadata; raises
        :class:`NotYetDiscovered` while that metadata has not landed."""

    @abstractmethod
    def decode(self, bronze: DataFrame, table: TableConfig, columns: list[ColumnSpec]) -> Decoded:
        """Bronze rows of one onboarded table -> canonical changes + quarantine rows."""

    @abstractmethod
    def unrouted(self, bronze: DataFrame, source: SourceConfig, tables: Iterable[TableConfig]) -> DataFrame:
        """Quarantine rows for bronze records no table's :meth:`decode` takes (unparseable
        envelopes, tables not onboarded), so every landed record is in silver or in quarantine."""

    # --- optional, with defaults -----------------------------------------------------------------

    def decode_landed(self, landed: DataFrame, table: TableConfig, columns: list[ColumnSpec],
                      admit: Callable[[DataFrame, Column | None], DataFrame]) -> Decoded:
        """:meth:`decode` as the pipeline calls it: ``landed`` is the source's records before their
        envelope check, and ``admit(frame, proven)`` keeps the rows of ``frame`` whose envelope passes
        :attr:`envelope_schema` (every row when there is none), taking the rows where the boolean
        column ``proven`` is true as valid without checking them (:func:`sqlcdc.expectations.valid_envelopes`).
        Default: ``decode(admit(landed, None), ...)``, every envelope checked. A decoder that proves
        some envelopes valid while it decodes (Debezium's fast path: docs/fast-path.md) overrides it,
        and a test must show that what it proves the check would have passed."""
        return self.decode(admit(landed, None), table, columns)

    def config_column(self, column: dict, ordinal: int) -> ColumnSpec:
        """One ``columns:`` entry of a table config (``name``, ``type``, ``lob``; ``ordinal`` its
        1-based position) as this producer reads it: the one type mapping decoders and ``sqlcdc
        validate`` share. Default: ``type`` is a Spark SQL type, the values its text."""
        return ColumnSpec(column["name"], str(column["type"]).strip().lower(), lob=bool(column.get("lob", False)),
                          ordinal=ordinal, source_type=str(column["type"]))

    #: The type spellings :meth:`config_column` reads besides Spark SQL types, for the config error.
    config_types: ClassVar[str] = ""

    def config_type_problem(self, column: dict, ordinal: int) -> str | None:
        """Why a ``columns:`` entry's ``type`` cannot type a silver column (None: it can), so the
        config is refused naming it rather than the run stopping on a Spark parse error."""
        from sqlcdc.formats._sqlserver import is_spark_type

        if "type" not in column or is_spark_type(self.config_column(column, ordinal).spark_type):
            return None
        return (f"{column['type']!r} (column {column['name']!r}) is not a type a {self.name} source reads: give a "
                f"Spark SQL type (int, bigint, decimal(10,2), string, date, timestamp_ntz, boolean, double, binary, "
                f"...){self.config_types}")

    def keys_for(self, table: TableConfig, source: SourceConfig, spark: SparkSession | None = None) -> list[str]:
        """Key columns from the producer's own metadata, used when the table config has no
        ``keys:``. Default: none (the config must name them)."""
        return []

    def is_skipped(self, bronze: DataFrame | None = None) -> Column:
        """Records that are by definition not changes (Debezium tombstones): counted as skipped,
        not quarantined. Default: none."""
        return F.lit(False)

    def skipped(self, bronze: DataFrame) -> Column:
        """The records of stored ``bronze`` a run counts as skipped: :meth:`is_skipped`, but not a
        record the pipeline quarantines before any decoder sees it (not UTF-8 text, where the
        decoder's own test might skip it: :func:`sqlcdc.formats.base.is_rejected_before_decoding`)."""
        from sqlcdc.formats.base import is_rejected_before_decoding

        return F.coalesce(self.is_skipped(bronze), F.lit(False)) & ~is_rejected_before_decoding()

    def unknown_types(self, columns: Iterable[ColumnSpec]) -> list[tuple[str, str]]:
        """``(column, source type)`` of columns whose type the decoder keeps as text (each gets a
        ``warn`` rule, :func:`sqlcdc.expectations.column_rules`). Default: none."""
        return []

    def disposition(self, bronze: DataFrame, source: SourceConfig) -> DataFrame:
        """``record_id, carried_by, status`` per bronze record: the record whose silver or quarantine
        row accounts for it, and ``pending`` for records that wait for others (CES segments).
        Default: every record carries itself."""
        return bronze.select("record_id", F.col("record_id").alias("carried_by"), F.lit("event").alias("status"))

    def duplicates(self, bronze: DataFrame, source: SourceConfig, tables: Iterable[TableConfig]) -> DataFrame:
        """``record_id, kept_record_id`` of bronze records that repeat a change already taken
        (at-least-once delivery) and are in neither silver nor quarantine; the balance counts them
        as ``duplicate``. Default: none (duplicates are the gold apply's concern)."""
        return bronze.select("record_id", F.col("record_id").alias("kept_record_id")).limit(0)

    def routed(self, bronze: DataFrame, source: SourceConfig, table: TableConfig) -> DataFrame:
        """Bronze records of ``table`` (with ``record_id, value, source_file, ingest_time``), for
        :meth:`waiting`. Needed by a decoder whose :meth:`columns_for` or :meth:`keys_for` may
        raise :class:`NotYetDiscovered`."""
        raise NotImplementedError(
            f"decoder {self.name} raised NotYetDiscovered for {table.qualified} but cannot route its records (Decoder.routed)"
        )

    def waiting(self, bronze: DataFrame, source: SourceConfig, table: TableConfig, reason: str) -> DataFrame:
        """Quarantine rows (rule ``waiting``, with ``reason``) for the records of a table whose
        metadata has not landed yet (:class:`NotYetDiscovered`)."""
        return self.routed(bronze, source, table).select(
            *model.quarantine_row(source_name=source.name, source_format=self.name, reason=F.lit(reason),
                                  table_name=table.name, rules=F.array(F.lit("waiting")))
        )

    def same_records(self, a: TableConfig, b: TableConfig) -> bool:
        """Whether tables ``a`` and ``b`` of one source would take the same records: the table
        onboarded twice, each record counted by both (:func:`sqlcdc.config.load_pipeline` refuses
        the second). Default: the same ``schema.table``, case-insensitively."""
        return a.qualified.lower() == b.qualified.lower()

    def handoff_problem(self, table: TableConfig) -> str | None:
        """Why ``table`` of this producer cannot be in a producer hand-off (``sources:``), or None.
        Default: it can when the producer has a ``position_field``."""
        if self.position_field is None:
            return "its changes carry no position in the SQL Server log beside their commit LSN"
        return None

    def change_position(self, table: TableConfig) -> Column:
        """A column over ``table``'s silver rows: the change's ``position_field`` as 20 hex digits,
        which with the commit LSN identifies the change across producers (:mod:`sqlcdc.gold.handoff`).
        Default: the sequence's ``change_lsn``, where a decoder that keeps log order puts it."""
        return F.col("sequence.change_lsn")

    def transaction_marks(self, bronze: DataFrame, source: SourceConfig) -> DataFrame | None:
        """Where the producer says its transactions end, for whole-transaction apply
        (:mod:`sqlcdc.gold.transactions`): one row per landed change record of ``source`` -- every
        table, onboarded or not, since a transaction spans them -- with ``transaction_id`` (string),
        ``position`` (bigint, the record's place in its transaction, from 1), ``last`` (boolean, the
        record ends its transaction; NULL under ``transaction_end = "later_commit"``), optionally
        ``size`` (bigint: the transaction's number of places, stated by a record that is no change
        and has no ``position``, e.g. Debezium's END), ``commit``
        (string ordered as the commit order, e.g. 20 hex digits of the commit LSN; NULL unless
        ``"later_commit"``) and ``landed`` (timestamp, bronze ingest time). ``bronze`` is the
        source's stored bronze, read as a batch. Default None: the producer marks no transaction end,
        so each change is applied as soon as it lands."""
        return None

    def dlt_meta_select(self, table: TableConfig, columns: list[dict]) -> tuple[list[str], list[str]] | None:
        """``sqlcdc export dlt-meta``'s silver transformation of ``table``: Spark SQL ``select_exp``
        turning the envelope text ``value`` into ``columns`` (config entries: ``name``, ``type``)
        plus ``_op`` (INSERT/UPDATE/DELETE/SNAPSHOT/TRUNCATE), ``_sequence`` and ``_commit_time``,
        and the ``where_clause`` keeping the table's change events. Default: None, dlt-meta cannot
        read this producer (the export refuses its tables, naming it)."""
        return None

    def __repr__(self) -> str:
        return f"<decoder {self.name}>"


#: The entry-point group through which another installed package adds a producer: the entry
#: point's name is the ``format``, its value a module whose ``DECODER`` is the decoder (or the
#: decoder itself), e.g. in that package's ``pyproject.toml``::
#:
#:     [project.entry-points."sqlcdc.formats"]
#:     toy = "toy_cdc.decoder"
ENTRY_POINT_GROUP = "sqlcdc.formats"


@lru_cache(maxsize=None)
def _built_in() -> tuple[str, ...]:
    """This package's decoder modules: listed once per process (``get`` runs per table and flow)."""
    return tuple(sorted(info.name for info in pkgutil.iter_modules(__path__)
                        if not info.name.startswith("_") and info.name != "base"))


def _plugins() -> dict[str, Any]:
    """Entry points of :data:`ENTRY_POINT_GROUP` (a built-in name is not overridden)."""
    from importlib.metadata import entry_points

    built_in = set(_built_in())
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in built_in}


def available() -> list[str]:
    """Names of the decoders: this package's modules and installed :data:`ENTRY_POINT_GROUP` entry points."""
    return sorted([*_built_in(), *_plugins()])


def get(name: str) -> Decoder:
    """The decoder of format ``name``; raises :class:`UnknownFormat` naming the choices."""
    if name in _built_in():
        where = f"sqlcdc.formats.{name}"
        decoder = getattr(importlib.import_module(where), "DECODER", None)
    elif (ep := _plugins().get(name)) is not None:
        where = f"entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP})"
        loaded = ep.load()
        decoder = loaded if isinstance(loaded, Decoder) else getattr(loaded, "DECODER", None)
    else:
        raise UnknownFormat(f"unknown producer format {name!r}; available: {', '.join(available())}")
    if not isinstance(decoder, Decoder) or decoder.name != name:
        raise UnknownFormat(f"{where} defines no DECODER (a Decoder named {name!r})")
    return decoder
