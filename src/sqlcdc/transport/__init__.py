"""Where bronze comes from. Each kind of location has one module; a decoder says what its landed
files are (text lines, Avro containers) and the transport decides how Spark reads them:

- :mod:`sqlcdc.transport.files`: landing folders -- Spark's file source in a local run, Auto Loader
  (``cloudFiles``) on Databricks.

Kafka / Event Hubs (:mod:`sqlcdc.kafka`) and the change-table JDBC reader (:mod:`sqlcdc.ct_jdbc`)
move here next (issue 15: one ``read_bronze(spark, source, streaming)``).
"""
