r"""File-name globs for Spark's file source (``pathGlobFilter``, Hadoop's ``GlobPattern``) that leave
out given names: a glob has no "not", so :func:`without_names` writes one out.

A local run must keep some landed files from Spark altogether (:mod:`sqlcdc.formats._file_checks`:
an ``.lz4`` file in the lz4 tool's frame format makes Hadoop's block codec allocate a buffer of the
size its magic bytes spell, 1.7 GB, which can stop the JVM). Spark's file source selects files by
one name glob only, so the landing's own glob ``G`` and "not one of the names ``S``" become one glob
for exactly ``L(G) \ S``, built over the trie of ``S``: at each prefix of a name in ``S``, a next
character that leaves the trie continues as ``G``'s pattern would (its states after the prefix),
one that stays in it goes down the trie, and the name may end there unless it is in ``S``.

>>> print(without_names(None, ["a.lz4"]))  # any name but a.lz4: not a..., a but not a...., ...
{,a{,\.{,l{,z{,4?*,[^4]*},[^z]*},[^l]*},[^\.]*},[^a]*}
>>> print(without_names("*.json", ["b.json"]))
{b{\.{j{s{o{n{[^\.]*\.json,\.{*\.json,json}},[^\.n]*\.json,\.{*\.json,json}},[^\.o]*\.json,\.{*\.json,json}},[^\.s]*\.json,\.{*\.json,json}},[^\.j]*\.json,\.{*\.json,json}},[^\.]*\.json},[^\.b]*\.json,\.{*\.json,json}}
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Iterable, Sequence

__all__ = ["alternatives", "without_names"]

_MAX = 0x10FFFF
_ALL = ((0, _MAX),)
#: Characters written ``\\c`` in a glob (its specials; every ASCII punctuation mark is safe to escape).
_PUNCTUATION = frozenset(string.punctuation)

Ranges = tuple[tuple[int, int], ...]  # sorted, disjoint, inclusive code point ranges


@dataclass(frozen=True)
class _Atom:
    """One step of a brace-free glob: ``kind`` ``lit`` (``chars`` one character), ``any`` (``?``),
    ``star`` (``*``) or ``set`` (``[...]``)."""

    kind: str
    chars: Ranges = _ALL


def _norm(ranges: Iterable[tuple[int, int]]) -> Ranges:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def _complement(ranges: Ranges) -> Ranges:
    out, at = [], 0
    for lo, hi in ranges:
        if lo > at:
            out.append((at, lo - 1))
        at = hi + 1
    if at <= _MAX:
        out.append((at, _MAX))
    return tuple(out)


def alternatives(glob: str) -> list[str]:
    """``glob`` without ``{a,b}`` groups: one glob per choice (nested groups too; escapes kept)."""
    depth, start, parts, i = 0, -1, [], 0
    while i < len(glob):
        c = glob[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
            if depth == 1:
                start, parts = i, [i + 1]
        elif c == "," and depth == 1:
            parts.append(i + 1)
        elif c == "}" and depth:
            depth -= 1
            if depth == 0:
                bounds = parts + [i + 1]
                choices = [glob[a:b - 1] for a, b in zip(bounds, bounds[1:])]
                return [x for ch in choices for x in alternatives(glob[:start] + ch + glob[i + 1:])]
        i += 1
    return [glob]


def _atoms(glob: str) -> list[_Atom]:
    """A brace-free Hadoop glob as atoms (``\\c`` a literal; ``[!...]`` and ``[^...]`` negated sets)."""
    out, i = [], 0
    while i < len(glob):
        c = glob[i]
        if c == "\\" and i + 1 < len(glob):
            out.append(_Atom("lit", ((ord(glob[i + 1]),) * 2,)))
            i += 2
        elif c == "*":
            out.append(_Atom("star"))
            i += 1
        elif c == "?":
            out.append(_Atom("any"))
            i += 1
        elif c == "[" and "]" in glob[i + 2:]:
            j, negated, ranges = i + 1, glob[i + 1] in "!^", []
            j += negated
            first = True
            while j < len(glob) and (glob[j] != "]" or first):
                lo = glob[j + 1] if glob[j] == "\\" else glob[j]
                j += 2 if glob[j] == "\\" else 1
                hi = lo
                if j + 1 < len(glob) and glob[j] == "-" and glob[j + 1] != "]":
                    hi = glob[j + 2] if glob[j + 1] == "\\" else glob[j + 1]
                    j += 3 if glob[j + 1] == "\\" else 2
                ranges.append((ord(lo), ord(hi)))
                first = False
            chars = _norm(ranges)
            out.append(_Atom("set", _complement(chars) if negated else chars))
            i = j + 1
        else:
            out.append(_Atom("lit", ((ord(c),) * 2,)))
            i += 1
    return out


def _char(code: int, in_set: bool = False) -> str:
    c = chr(code)
    return "\\" + c if c in _PUNCTUATION or (in_set and c == " ") else c


def _set_glob(ranges: Ranges) -> str:
    if ranges == _ALL:
        return "?"
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _char(ranges[0][0])
    negated = ranges[-1][1] == _MAX
    body = _complement(ranges) if negated else ranges
    parts = "".join(_char(lo, True) if lo == hi else f"{_char(lo, True)}-{_char(hi, True)}" for lo, hi in body)
    return f"[{'^' if negated else ''}{parts}]"


def _atom_glob(a: _Atom) -> str:
    return "*" if a.kind == "star" else _set_glob(a.chars) if a.kind != "any" else "?"


@dataclass
class _Node:
    children: dict[int, "_Node"] = field(default_factory=dict)
    terminal: bool = False


class _Minus:
    """``L(pattern) \ names`` for one brace-free pattern."""

    def __init__(self, pattern: Sequence[_Atom]) -> None:
        self.p = list(pattern)

    def closure(self, states: Iterable[int]) -> frozenset[int]:
        out, todo = set(states), list(states)
        while todo:
            i = todo.pop()
            if i < len(self.p) and self.p[i].kind == "star" and i + 1 not in out:
                out.add(i + 1)
                todo.append(i + 1)
        return frozenset(out)

    def accepts(self, i: int, code: int) -> bool:
        return i < len(self.p) and any(lo <= code <= hi for lo, hi in self.p[i].chars)

    def step(self, states: frozenset[int], code: int) -> frozenset[int]:
        nxt = [i for i in states if self.accepts(i, code) and self.p[i].kind == "star"]
        nxt += [i + 1 for i in states if self.accepts(i, code) and self.p[i].kind != "star"]
        return self.closure(nxt)

    def rest(self, states: frozenset[int]) -> str:
        """The glob of what may follow in ``states`` (the pattern's suffixes from them)."""
        tails = sorted({"".join(_atom_glob(a) for a in self.p[i:]) for i in states})
        if "*" in tails:
            return "*"  # it takes in the others
        tails = [t for t in tails if "*" + t not in tails]  # ``*x`` takes in ``x``
        return tails[0] if len(tails) == 1 else "{" + ",".join(tails) + "}"

    def glob(self, node: _Node, states: frozenset[int]) -> str | None:
        alts = []
        if len(self.p) in states and not node.terminal:
            alts.append("")
        for code, child in sorted(node.children.items()):
            nxt = self.step(states, code)
            sub = self.glob(child, nxt) if nxt else None
            if sub is not None:
                alts.append(_char(code) + sub)
        # a next character that leaves the trie: grouped by the states it leads to
        cuts = {0, _MAX + 1}
        for i in states:
            if i < len(self.p):
                for lo, hi in self.p[i].chars:
                    cuts |= {lo, hi + 1}
        for code in node.children:
            cuts |= {code, code + 1}
        by_next: dict[frozenset[int], list[tuple[int, int]]] = {}
        bounds = sorted(cuts)
        for lo, end in zip(bounds, bounds[1:]):
            if lo in node.children:
                continue
            nxt = self.step(states, lo)
            if nxt:
                by_next.setdefault(nxt, []).append((lo, end - 1))
        for nxt, ranges in sorted(by_next.items(), key=lambda kv: kv[1]):
            alts.append(_set_glob(_norm(ranges)) + self.rest(nxt))
        if not alts:
            return None
        return alts[0] if len(alts) == 1 else "{" + ",".join(alts) + "}"


def without_names(glob: str | None, names: Iterable[str]) -> str:
    """A Hadoop file-name glob matching what ``glob`` matches (every name when None) except ``names``.

    ``names`` are whole file names (no folders); the result can be long (a few alternatives per
    character of each name), which Hadoop compiles once per read.
    """
    root = _Node()
    for name in names:
        node = root
        for ch in name:
            node = node.children.setdefault(ord(ch), _Node())
        node.terminal = True
    alts = []
    for pattern in alternatives(glob or "*"):
        minus = _Minus(_atoms(pattern))
        sub = minus.glob(root, minus.closure({0}))
        if sub is not None:
            alts.append(sub)
    if not alts:
        return "{}"  # only the empty name, which no file has
    return alts[0] if len(alts) == 1 else "{" + ",".join(alts) + "}"
