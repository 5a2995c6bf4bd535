"""``sqlcdc.transport.globs.without_names``: a landing's glob minus the names of files Spark must not
open, judged by Hadoop's own ``GlobPattern`` (what Spark's ``pathGlobFilter`` compiles)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sqlcdc.transport.globs import without_names

#: Globs as landings spell them (CES's default, sets, negated sets, ranges, escapes, nested groups).
GLOBS = [None, "*", "*.json", "*.{json,jsonl,ndjson}", "*.avro", "a*", "*a*", "?b*", "[ab]*.json", "[!a]*", "x[^.-]?*",
         "*.json*", "a\\*b*", "{a,b{c,d}}*", "[a-c]*[!x]", "*.json.{gz,lz4,snappy}"]
#: Characters that mean something to a glob or a regex, a letter, and non-ASCII ones (one outside the BMP).
ALPHABET = "abx.-,{}[]!^\\*?|+$() é日😀"

names = st.text(alphabet=ALPHABET, min_size=1, max_size=6)


def test_landing_globs_lose_exactly_the_names_left_out(spark):
    pattern = spark.sparkContext._jvm.org.apache.hadoop.fs.GlobPattern

    @settings(max_examples=150, deadline=None)
    @given(glob=st.sampled_from(GLOBS), left_out=st.lists(names, min_size=1, max_size=3),
           others=st.lists(names, max_size=12))
    def check(glob, left_out, others):
        got, before = pattern(without_names(glob, left_out)), pattern(glob or "*")
        near = [n + c for n in left_out for c in "a.😀"] + [n[:-1] for n in left_out if len(n) > 1]
        for name in {*left_out, *others, *near, "a.json", "x.json.lz4"}:
            assert got.matches(name) == (before.matches(name) and name not in left_out), (glob, left_out, name)

    check()

