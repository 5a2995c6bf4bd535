"""Bronze: declared from config (see sqlcdc.pipeline). Keep this file thin."""

from sqlcdc import pipeline

pipeline.declare_bronze(pipeline.load())
