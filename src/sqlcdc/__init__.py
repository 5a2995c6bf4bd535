"""sqlcdc: SQL Server change data (CT, CES, Debezium, Qlik) into bronze, silver and SCD gold.

The package is a library; the `pipelines/` definition files and the `sqlcdc` command call it.

Modules, one job each:

- :mod:`sqlcdc.model`          the canonical change (silver) every decoder emits
- :mod:`sqlcdc.values`         raw value text -> typed Spark column, shared by decoders
- :mod:`sqlcdc.lsn`            SQL Server LSN normalization and the ordering key
- :mod:`sqlcdc.formats`        one decoder per producer (``formats/<name>.py``)
- :mod:`sqlcdc.gold`           gold: SCD1/SCD2 with AUTO CDC semantics (spec, recompute, incremental)
- :mod:`sqlcdc.config`         YAML config loading, validated by ``schemas/``
- :mod:`sqlcdc.runtime`        Spark sessions and the local SDP run
- :mod:`sqlcdc.cli`            the ``sqlcdc`` command
"""

__version__ = "0.1.0"
