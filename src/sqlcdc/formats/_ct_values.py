"""Values of change-table rows: the export spellings of LSNs, binary values and the update mask
(:func:`lsn_text`, :func:`binary_hex`, :func:`changed_from_mask`), and a bronze row parsed into its
metadata, typed image and the reasons it cannot be decoded (``_parsed``).

Private to :mod:`sqlcdc.formats.cdc_ct` (which re-exports the names in ``__all__``); see its
docstring, "Decoding".
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from sqlcdc import frames, lsn, model
from sqlcdc.config import TableConfig
from sqlcdc.formats._ct_exports import BINARY_HINT, UNREADABLE, WHOLE_ROW_HINT
from sqlcdc.formats._ct_names import (
    COMMAND_ID,
    COMMIT_TIME_COLUMN,
    NAME,
    OPERATION,
    SEQVAL,
    START_LSN,
    UPDATE_MASK,
    capture_instance_col,
    table_capture_instance,
)
from sqlcdc.formats._json_numbers import LONG_NUMBER, number_as_written
from sqlcdc.formats._masks import mask_has, mask_names
from sqlcdc.formats.base import nested_keys_in, one_json_value
from sqlcdc.values import (COMMIT_TIME_RANGE, VALUE_WARNINGS_COL, ColumnSpec, commit_time, decimal_type, null_key_reasons,
                           split_value_errors, typed_struct)

__all__ = ["binary_hex", "changed_from_mask", "lsn_text"]

# --- value spellings -----------------------------------------------------------------------------


_OP_UPDATE_OLD, _OP_UPDATE_NEW = 3, 4  # __$operation of an update's before / after image


def lsn_text(raw: Column) -> Column:
    """An LSN in an export spelling -> 20 hex digits; NULL unless it is exactly a binary(10).

    Spellings: ``0x`` + 20 hex digits, 20 bare hex digits (``bcp``), or base64 of the 10 bytes
    (16 characters ending ``==``: ``FOR JSON``, and Parquet binary as bronze renders it). A short
    or long value (``0x01``, 24 digits), non-hex text or the zero LSN is NULL: never padded.
    """
    t = F.trim(raw)
    return F.when(
        t.rlike(r"^[A-Za-z0-9+/]{14}==$"), lsn.binary_lsn(F.try_to_binary(t, F.lit("base64")))
    ).otherwise(lsn.parse_lsn(t, "hex"))


def _json_number(value: Column, name: str) -> Column:
    """True when ``name`` in the JSON row ``value`` is a JSON number, not text (LSNs are text or
    binary: 12345678901234567890 as a number is not the LSN 0x12345678901234567890)."""
    field = F.try_variant_get(F.try_parse_json(value), "$['" + name + "']", "variant")
    return F.coalesce(F.schema_of_variant(field) != F.lit("STRING"), F.lit(False))


def binary_hex(raw: Column, prefer_base64: bool | Column = False) -> Column:
    """Binary text (``0x`` hex, bare hex, base64) -> upper-case hex digits, NULL when unreadable.

    Text that reads both ways (``AAAf``) is hex unless ``prefer_base64`` (a flag or a per-row
    condition) says base64; ``0x`` always means hex (``0xZZ`` is NULL, not base64), unless
    ``prefer_base64`` says the row's binary is base64 (Parquet).
    """
    t = F.trim(raw)
    prefixed = t.rlike(r"^0[xX]([0-9A-Fa-f]{2})*$")
    bare_hex = t.rlike(r"^([0-9A-Fa-f]{2})*$")
    b64 = t.rlike(r"^[A-Za-z0-9+/]*={0,2}$") & (F.length(t) % 4 == 0)
    from_hex = F.upper(F.regexp_replace(t, r"^0[xX]", ""))
    from_b64 = F.hex(F.try_to_binary(t, F.lit("base64")))
    prefer = prefer_base64 if isinstance(prefer_base64, Column) else F.lit(bool(prefer_base64))
    return (
        F.when(prefixed, from_hex)
        .when(F.coalesce(prefer, F.lit(False)) & b64, from_b64)
        .when(t.rlike(r"^0[xX]"), F.lit(None))  # 0x + non-hex (0xZZ): not binary, never base64
        .when(bare_hex, from_hex)
        .when(b64, from_b64)
    )


def changed_from_mask(mask_hex: Column, columns: list[ColumnSpec]) -> Column:
    """The names of the columns whose mask bit is set, in column order; NULL when no mask."""
    ordinals = {c.name: c.ordinal or i for i, c in enumerate(columns, 1)}
    return F.when(mask_hex.isNotNull(), mask_names(mask_hex, ordinals, "big"))

# --- a bronze row parsed -------------------------------------------------------------------------


#: ``from_json`` options of a change-table row: JSON as RFC 8259 writes it (Spark's defaults also
#: take 'single quotes' and NaN/Infinity literals, which no export writes and Python refuses).
STRICT_JSON = {"allowSingleQuotes": "false", "allowNonNumericNumbers": "false"}


def _text_decimal(spec: ColumnSpec) -> bool:
    """A decimal column read from text: the kind :func:`_through_double` may find read through a double."""
    return decimal_type(spec.spark_type) is not None and spec.encoding == "text"


def _through_double(v: Column, spec: ColumnSpec, long_number: Column) -> Column | None:
    """Where ``v`` (a decimal column's text from ``from_json``) may be a JSON number Spark read
    through a double, its digits lost (``922337203685477.5807`` -> ``9.223372036854776E14``,
    ``10.0000000000000001`` -> ``10.0``): a non-integer number, where the row holds a number
    written with more digits than a double keeps (``long_number``) or the double's text has 16
    digits or more (Java may spell a double with more digits than its shortest). A number of up to
    15 digits survives a double. NULL: not a decimal column. FOR JSON writes decimals and money as
    JSON numbers; so does a Parquet row here."""
    if not _text_decimal(spec):
        return None
    number = v.rlike(r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$") & v.rlike("[.eE]")
    digits = F.length(F.regexp_replace(F.regexp_replace(v, "[eE].*$", ""), "[^0-9]", ""))
    return number & (long_number | (digits >= 16))


def _exact_numbers(value: Column, m: Column, columns: list[ColumnSpec]) -> Column:
    """The decimal columns' values read exactly (a VARIANT keeps a JSON number's digits, or
    :func:`~sqlcdc.formats._json_numbers.number_as_written` takes them from the text), where one may have
    been read through a double (:func:`_through_double`); else NULL, and the row is parsed once."""
    long_number = value.rlike(LONG_NUMBER)
    decimals = [c for c in columns if _text_decimal(c)]
    if not decimals:
        return F.lit(None).cast("map<string,string>")
    lossy = [_through_double(m[c.name], c, long_number) for c in decimals]
    exact = frames.let(F.try_variant_get(F.try_parse_json(value), "$", "map<string,variant>"), lambda vm: F.create_map(
        *[x for c in decimals for x in (F.lit(c.name), number_as_written(vm[c.name], value, c.name))]))
    return F.when(frames.any_of(lossy) & m[WHOLE_ROW_HINT].isNull(), exact)  # a CSV row's values are text


def _raw_map(m: Column, columns: list[ColumnSpec], prefer_base64: Column, exact: Column) -> Column:
    """The configured columns' text, binary normalised to ``0x`` hex (kept as is when unreadable),
    a decimal read through a double taken from ``exact`` (:func:`_exact_numbers`).
    A CSV row's empty text (a quoted ``""``) is NULL but in a text column: an export that quotes
    every field writes NULL so, and a number or a date cannot be empty."""
    csv_row = m[WHOLE_ROW_HINT].isNotNull()
    entries = []
    for c in columns:
        v = m[c.name]
        if _text_decimal(c):  # the exact text where the row was read again
            v = F.coalesce(exact[c.name], v)
        if c.spark_type != "string" or c.encoding != "text" or c.json_value:
            v = F.when(csv_row & (v == ""), F.lit(None)).otherwise(v)
        if c.encoding == "hex":
            h = binary_hex(v, prefer_base64)
            v = F.when(v.isNull(), v).when(h.isNotNull(), F.concat(F.lit("0x"), h)).otherwise(v)
        entries += [F.lit(c.name), v]
    return F.create_map(*entries)


def _parsed(bronze: DataFrame, table: TableConfig, columns: list[ColumnSpec], *, net: bool = False) -> DataFrame:
    """Bronze rows of ``table`` + parsed metadata, typed image, and ``_reasons`` (empty = good).

    ``net``: rows of ``fn_cdc_get_net_changes`` (no ``__$seqval``; operations 1, 2, 4, 5)."""
    ci = table_capture_instance(table)
    option_b64 = str(table.source.options.get("binary_text", "hex")).lower() == "base64"
    rows = bronze.where(F.lower(capture_instance_col(F.col("source_file"))) == ci.lower())
    # of '{...}{...}' Spark reads the first alone; strict JSON, as the other producers' parse_json:
    # by default from_json took 'single quotes' and NaN literals
    first = F.from_json(F.col("value"), "map<string,string>", STRICT_JSON)
    rows = rows.select("*", F.when(one_json_value(F.col("value")), first).alias("_m"), first.isNotNull().alias("_an_object"))
    m = F.col("_m")
    prefer_b64 = F.lit(True) if option_b64 else F.coalesce(m[BINARY_HINT] == "base64", F.lit(False))
    # The text map is a column of its own: typed_struct reads it once per column, and a map
    # expression written into each read made the plan grow with the square of the column count
    # (20 columns: a 12 MB silver plan; Spark Connect refuses messages over 128 MB).
    rows = rows.select("*", _exact_numbers(F.col("value"), m, columns).alias("_exact"))
    rows = rows.select("*", _raw_map(m, columns, prefer_b64, F.col("_exact")).alias("_raw"),
                       nested_keys_in(F.col("value"), "$", m).alias("_nested"))
    image, value_errors = typed_struct(F.col("_raw"), columns, F.col("_nested"))
    mask_raw = m[UPDATE_MASK]
    mask = binary_hex(mask_raw, prefer_b64)
    # A 20-digit LSN must be JSON text: the same digits as a JSON number are a number (rare: only
    # then is the row parsed a second time, as a variant, to tell).
    def lsn_of(raw: Column, name: str) -> Column:
        v = lsn_text(raw)
        return F.when(F.trim(raw).rlike(r"^[0-9]{20}$") & _json_number(F.col("value"), name), F.lit(None)).otherwise(v)

    rows = rows.select(
        "*",
        lsn_of(m[START_LSN], START_LSN).alias("_start"),
        lsn_of(m[SEQVAL], SEQVAL).alias("_seq"),
        m[OPERATION].try_cast("int").alias("_op"),
        m[COMMAND_ID].try_cast("int").alias("_cmd"),
        mask.alias("_mask"),
        image.alias("_img"),
        commit_time(m[COMMIT_TIME_COLUMN]).alias("_commit_time"),
        value_errors.alias("_value_errors"),
    )
    keys = list(table.keys)
    value_reasons, value_warnings = split_value_errors(F.col("_value_errors"), columns, keys, table.bad_values)
    ops = (1, 2, 4, 5) if net else (1, 2, 3, 4)
    bad_op = (f"{OPERATION} %s is not 1, 2, 4 or 5 (a net-changes export)" if net
              else f"{OPERATION} %s is not 1, 2, 3 or 4")
    reasons = frames.compact(
        F.concat(
            F.array(
                F.when(m.isNull() & F.col("_an_object"), F.lit(
                    "more than one JSON document on one line (each landed line must hold exactly one change-table row)")),
                F.when(~F.col("_an_object"), F.lit("not a JSON object")),
                # from_json keeps both entries of a key written twice, and a lookup takes the first
                F.when(m.isNotNull() & (F.size(F.array_distinct(F.map_keys(m))) < F.size(m)), F.format_string(
                    "duplicate key %s in one row (which of its values is the row's cannot be told)",
                    F.array_join(F.filter(F.array_distinct(F.map_keys(m)),
                                          lambda k: F.size(F.filter(F.map_keys(m), lambda x: x == k)) > 1), ", "))),
                F.when(m.isNotNull() & m[START_LSN].isNull(), F.lit(f"missing {START_LSN}")),
                F.when(m[START_LSN].isNotNull() & F.col("_start").isNull(),
                       F.format_string(f"{START_LSN} %s is not an LSN ({_LSN_SHAPES})", F.substring(m[START_LSN], 1, 60))),
                F.when(F.lit(not net) & m.isNotNull() & m[SEQVAL].isNull(), F.lit(
                    f"missing {SEQVAL} (an export of fn_cdc_get_net_changes? then set options.function: net_changes)")),
                F.when(F.lit(not net) & m[SEQVAL].isNotNull() & F.col("_seq").isNull(),
                       F.format_string(f"{SEQVAL} %s is not an LSN ({_LSN_SHAPES})", F.substring(m[SEQVAL], 1, 60))),
                F.when(m.isNotNull() & ~F.coalesce(F.col("_op").isin(*ops), F.lit(False)),
                       F.format_string(bad_op, F.coalesce(m[OPERATION], F.lit("NULL")))),
                F.when(m[COMMAND_ID].isNotNull() & F.col("_cmd").isNull(),
                       F.format_string(f"{COMMAND_ID} %s is not an integer", m[COMMAND_ID])),
                F.when(mask_raw.isNotNull() & mask.isNull(),
                       F.format_string(f"{UPDATE_MASK} %s is not binary (0x hex or base64)", mask_raw)),
                F.when(m[COMMIT_TIME_COLUMN].isNotNull() & F.col("_commit_time").isNull(), F.format_string(
                    f"{COMMIT_TIME_COLUMN} %s is not a time within {COMMIT_TIME_RANGE}", F.substring(m[COMMIT_TIME_COLUMN], 1, 60))),
            ),
            value_reasons,
            # a CSV/Parquet file without a configured column: its value was not exported, never NULL
            F.array(*[F.when((m[BINARY_HINT].isNotNull() | m[WHOLE_ROW_HINT].isNotNull()) & ~F.map_contains_key(m, c.name),
                             F.lit(f"column {c.name} is not in the file's header or schema")) for c in columns]),
            null_key_reasons(F.col("_img"), keys, where=m.isNotNull()),
        )
    )
    # a file or CSV line bronze could not read (UNREADABLE): its reason, and nothing read from it
    reasons = F.when(m[UNREADABLE].isNotNull(), F.array(m[UNREADABLE])).otherwise(reasons)
    warned = [] if value_warnings is None else [value_warnings.alias(VALUE_WARNINGS_COL)]  # bad_values: warn
    return rows.select("*", reasons.alias("_reasons"), *warned)


_LSN_SHAPES = "binary(10), 0x hex or base64"


def _copies(good: DataFrame, identity: list[str], content: Column, *, agree: tuple[str, ...] = ()) -> DataFrame:
    """Readable rows + where each stands among the rows landed for its ``identity``: ``_conflict``
    (their ``content`` differs, or the non-NULL values of an ``agree`` column do), ``_dup`` (1 = the
    copy kept: lowest record id), ``_kept`` (that copy's record id), ``_copy`` (1 = first row of its
    record id), ``_variants``/``_files`` (for the conflict's reason)."""
    at = Window.partitionBy(*identity)
    good = good.select("*", content.alias("_content"))
    differ = ~F.min("_content").over(at).eqNullSafe(F.max("_content").over(at))
    for c in agree:
        differ = differ | ~F.min(c).over(at).eqNullSafe(F.max(c).over(at))
    return good.select(
        "*",
        differ.alias("_conflict"),
        F.row_number().over(at.orderBy("record_id")).alias("_dup"),
        F.min("record_id").over(at).alias("_kept"),
        F.row_number().over(Window.partitionBy(*identity, "record_id").orderBy("record_id")).alias("_copy"),
        F.size(F.collect_set("_content").over(at)).alias("_variants"),
        F.array_sort(F.collect_set("source_file").over(at)).alias("_files"),
    )


def _deduplicated(good: DataFrame, apart: tuple[str, ...] = ()) -> DataFrame:
    """:func:`_copies` of all-changes rows, identity (start_lsn, seqval, operation), compared on
    update mask and image (a missing command id is not a difference, another one is), plus per
    (start_lsn, seqval) ``_old_conflict``/``_new_conflict`` (the operation 3 / 4 rows there conflict).
    ``apart``: columns whose values split the rows into groups compared only among themselves (a
    frame that keeps its unreadable rows puts them apart from the readable ones)."""
    position = Window.partitionBy(*apart, "_start", "_seq")
    # compared as JSON text: any column type compares, and a typed value has one spelling
    content = F.to_json(F.struct(F.col("_mask").alias("m"), F.col("_img").alias("i")))
    good = _copies(good, [*apart, "_start", "_seq", "_op"], content, agree=("_cmd",))
    return good.select(
        "*",
        F.coalesce(F.max(F.col("_conflict") & (F.col("_op") == _OP_UPDATE_OLD)).over(position), F.lit(False)).alias("_old_conflict"),
        F.coalesce(F.max(F.col("_conflict") & (F.col("_op") == _OP_UPDATE_NEW)).over(position), F.lit(False)).alias("_new_conflict"),
    )


def dealt(rows: DataFrame) -> DataFrame:
    """``rows`` (each with ``_rank``, its place in command order) + ``_slot_seq``/``_slot_serial``:
    the (seqval, serial) that holds place ``_rank`` in seqval order among the changes of its commit
    (NULL for rows that are not changes). One pass, no join: each change row also offers its own
    slot under its seqval rank, and a window over (commit, place) hands it to the row taking that
    place. A self-join computed the whole parse of the rows twice (both sides of it), ~half the
    decode's time."""
    chg = F.col("_chg")
    by_seqval = Window.partitionBy("_chg", "_start").orderBy("_seq", "_serial")
    rows = rows.select("*", F.when(chg, F.row_number().over(by_seqval)).alias("_slot_rank"))
    offer = F.explode(F.when(chg, F.array(F.lit(False), F.lit(True))).otherwise(F.array(F.lit(False))))
    sides = rows.select("*", offer.alias("_offer"))
    place = F.when(F.col("_offer"), F.col("_slot_rank")).otherwise(F.col("_rank"))
    sides = sides.select("*", place.alias("_place"))
    at_place = Window.partitionBy("_chg", "_start", "_place")
    slot = F.first(F.when(F.col("_offer"), F.struct(F.col("_seq").alias("seq"), F.col("_serial").alias("serial"))),
                   ignorenulls=True).over(at_place)
    taken = sides.select("*", slot.alias("_slot")).where(~F.col("_offer"))
    # the helper columns stay: naming the others would need the frame's schema (analysis, which a
    # pipeline query function may not ask for)
    return taken.select("*", F.col("_slot.seq").alias("_slot_seq"), F.col("_slot.serial").alias("_slot_serial"))


def lob_provided(columns: list[ColumnSpec], is_update: Column, image: Column, mask: Column) -> Column | None:
    """``provided_columns`` of an update whose LOB column is NULL while the update mask (when there
    is one) says the column did not change: every column but those (not provided: gold keeps its
    value); NULL (all provided) otherwise; None when the table has no LOB column."""
    missing = [F.when(is_update & image[c.name].isNull() & mask.isNotNull() & ~mask_has(mask, c.ordinal or i, "big"),
                      F.lit(c.name)) for i, c in enumerate(columns, start=1) if c.lob]
    if not missing:
        return None
    lobs = frames.compact(missing)
    return F.when(F.size(lobs) > 0, F.array_except(F.array(*[F.lit(c.name) for c in columns]), lobs))


def quarantine_columns(table: TableConfig, reason: Column) -> list[Column]:
    """Quarantine-row columns of ``table`` (rule ``decode``) over a bronze-derived frame, ``reason``
    naming capture instance and file."""
    return model.quarantine_row(
        source_name=table.source.name,
        source_format=NAME,
        table_name=table.name,
        reason=F.format_string("%s (capture instance %s, file %s)", reason, F.lit(table_capture_instance(table)), F.col("source_file")),
        rules=F.array(F.lit("decode")),
    )


def table_option(table: TableConfig, name: str) -> Column:
    """Option ``name`` of the table, else of its source, as a string literal (NULL when absent)."""
    value = table.options.get(name, table.source.options.get(name))
    return F.lit(None).cast("string") if value is None else F.lit(str(value))
