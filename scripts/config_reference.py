"""Print the field reference of sqlcdc's config schemas as Markdown (``docs/config.md`` embeds it;
a test holds the two equal)::

    python scripts/config_reference.py
"""

from __future__ import annotations

import json

from sqlcdc.assets import SCHEMAS_DIR


def _deref(node: dict, doc: dict) -> tuple[dict, dict]:
    """Follow ``$ref`` (local or into a sibling schema file); returns (node, the document it is in)."""
    while "$ref" in node:
        file, _, pointer = node["$ref"].partition("#")
        if file:
            doc = json.loads((SCHEMAS_DIR / file).read_text())
        target = doc
        for part in pointer.strip("/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node, doc


def _type_word(node: dict) -> str:
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    t = node.get("type")
    if t == "array":
        item = node.get("items") or {}
        inner = item.get("type") or ("mapping" if "properties" in item else "")
        return f"list of {inner}" if inner not in ("", "object") else "list of mappings"
    if isinstance(t, list):
        return " or ".join(t)
    if t == "object":
        return "mapping"
    if "oneOf" in node:
        return "one of several shapes"
    return t or "any"


def _rows(node: dict, doc: dict, path: str, out: list[tuple[str, str, str, str]]) -> None:
    node, doc = _deref(node, doc)
    for name, sub in (node.get("properties") or {}).items():
        sub, subdoc = _deref(sub, doc)
        p = f"{path}.{name}" if path else name
        required = name in (node.get("required") or ())
        default = sub.get("default")
        out.append((
            f"`{p}`" + (" (required)" if required else ""),
            _type_word(sub),
            "" if default is None else f"`{json.dumps(default)}`",
            " ".join(str(sub.get("description", "")).split()).replace("<", "&lt;"),
        ))
        if sub.get("type") == "object" and "properties" in sub:
            _rows(sub, subdoc, p, out)
        elif sub.get("type") == "array" and isinstance(sub.get("items"), dict):
            item, itemdoc = _deref(sub["items"], subdoc)
            if "properties" in item:
                _rows(item, itemdoc, p + "[]", out)
        elif isinstance(sub.get("additionalProperties"), dict):
            item, itemdoc = _deref(sub["additionalProperties"], subdoc)
            if "properties" in item:
                _rows(item, itemdoc, p + ".<name>", out)
        for i, branch in enumerate(sub.get("oneOf") or ()):
            branch, bdoc = _deref(branch, subdoc)
            if "properties" in branch:
                _rows(branch, bdoc, p, out)


def reference_markdown() -> str:
    """The field reference of every config schema, as Markdown (docs/config.md embeds it)."""
    parts = []
    for schema_file in ("pipeline-config.schema.json", "table-config.schema.json", "expectations.schema.json"):
        doc = json.loads((SCHEMAS_DIR / schema_file).read_text())
        intro = " ".join(doc["description"].split()).replace("<", "&lt;")
        parts.append(f"### {doc['title']} (`src/sqlcdc/schemas/{schema_file}`)\n\n{intro}\n")
        rows: list[tuple[str, str, str, str]] = []
        if "oneOf" in doc:  # the expectations file: document the rule shape
            _rows({"properties": {"expectations": doc["oneOf"][1]["properties"]["expectations"]}}, doc, "", rows)
            for key in ("expect", "expect_or_drop", "expect_or_fail", "expect_or_quarantine"):
                sub = doc["oneOf"][2]["properties"][key]
                rows.append((f"`{key}`", "mapping of rule name to constraint", "", sub["description"]))
        else:
            _rows(doc, doc, "", rows)
        parts.append("| field | type | default | description |\n|---|---|---|---|\n" + "\n".join(
            "| " + " | ".join(c.replace("|", "\\|") if i == 3 else c for i, c in enumerate(r)) + " |" for r in rows
        ) + "\n")
    parts.append(options_markdown())
    return "\n".join(parts)


def options_markdown() -> str:
    """Each producer's ``options:`` (:attr:`sqlcdc.formats.Decoder.options`): what config loading accepts."""
    from sqlcdc import formats

    out = ["### Producer options (`options:` of a source, or of a table where marked)\n",
           "Declared by each decoder; any other option is refused when the config loads.\n"]
    for name in formats.available():
        decoder = formats.get(name)
        out.append(f"`{name}` ({decoder.label}):\n")
        if not decoder.options:
            out.append("none\n")
            continue
        rows = [f"| `{opt}` | {_type_word(dict(schema))} | {schema.get('description', '')} |"
                for opt, schema in decoder.options.items()]
        out.append("| option | type | description |\n|---|---|---|\n" + "\n".join(rows) + "\n")
    return "\n".join(out)


if __name__ == "__main__":
    print(reference_markdown(), end="")
