"""JSON Schema to the TypeScript-like signatures the gpt-oss (harmony) format writes for tools.

    // Gets the weather.
    type get_weather = (_: {
    // City name
    location: string,
    unit?: "c" | "f", // default: c
    }) => any;

The layout follows OpenAI's reference renderer exactly, quirks included: nested objects indent
their members by four spaces and their closing brace too; `oneOf` renders as a ` | ` list (a
property's own `oneOf` differently from a nested one); `anyOf`, `allOf`, `$ref`, `const` and
enums of non-string types render as `any`; `integer` is `number`; defaults are written as the
reference's JSON writer writes them (compact, shortest floats). Every piece carries the JSON
path it comes from, so a change in a schema is reported at its exact property.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pcache.prompt.renderers.harmony_json import compact_json

Piece = tuple[str, str | None]

_PLAIN_KEY = re.compile(r"^[^.\[\]\"]+$")
_SCALAR_TYPES = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean"}


def key_path(base: str, key: str) -> str:
    """`base.key`, or `base["key"]` when the key holds `.`, `[`, `]` or `"`."""
    if _PLAIN_KEY.match(key):
        return f"{base}.{key}"
    return f"{base}[{json.dumps(key, ensure_ascii=False)}]"


def tool_pieces(name: str, description: str, parameters: Any, path: str) -> list[Piece]:
    """One `type NAME = (...) => any;` entry; `path` is the tool's `function` object."""
    pieces: list[Piece] = []
    for line in _lines(description):
        pieces += [("// ", None), (line, f"{path}.description"), ("\n", None)]
    pieces += [("type ", None), (name, f"{path}.name"), (" = ", None)]
    if parameters is None:
        pieces.append(("()", None))
    else:
        pieces.append(("(_: ", None))
        pieces += schema_pieces(parameters, "", f"{path}.parameters")
        pieces.append((")", None))
    pieces.append((" => any;\n\n", None))
    return pieces


def schema_pieces(schema: Any, indent: str, path: str) -> list[Piece]:
    """The type expression of `schema`; nested lines start with `indent`."""
    if not isinstance(schema, dict):
        return [("any", path)]
    variants = schema.get("oneOf")
    if isinstance(variants, list):
        return _variant_pieces(variants, indent, path, in_property=False)
    kind = schema.get("type")
    if isinstance(kind, list):
        names = [
            (_SCALAR_TYPES.get(item, item), f"{path}.type[{index}]")
            for index, item in enumerate(kind)
            if isinstance(item, str)
        ]
        return _joined(names, " | ") if names else [("any", f"{path}.type")]
    if kind == "object":
        return _object_pieces(schema, indent, path)
    if kind == "array":
        if "items" not in schema:
            return [("Array<any>", f"{path}.type")]
        return [*schema_pieces(schema["items"], indent, f"{path}.items"), ("[]", f"{path}.type")]
    if kind == "string" and isinstance(schema.get("enum"), list):
        values = [
            (f'"{value}"', f"{path}.enum[{index}]")
            for index, value in enumerate(schema["enum"])
            if isinstance(value, str)
        ]
        if values:
            return _joined(values, " | ")
    if isinstance(kind, str) and kind in _SCALAR_TYPES:
        return [(_SCALAR_TYPES[kind], f"{path}.type")]
    return [("any", path)]


def _object_pieces(schema: dict[str, Any], indent: str, path: str) -> list[Piece]:
    pieces: list[Piece] = []
    if isinstance(schema.get("description"), str):
        pieces += [(f"{indent}// ", None), (schema["description"], f"{path}.description")]
        pieces.append(("\n", None))
    pieces.append(("{\n", None))
    properties = schema.get("properties")
    if isinstance(properties, dict):
        required = schema.get("required")
        required = {r for r in required if isinstance(r, str)} if isinstance(required, list) else ()
        for key, value in properties.items():
            pieces += _property_pieces(
                key, value, key in required, indent, key_path(f"{path}.properties", key), path
            )
    pieces.append((f"{indent}}}", None))
    return pieces


def _property_pieces(
    key: str, schema: Any, is_required: bool, indent: str, path: str, parent: str
) -> list[Piece]:
    prop = schema if isinstance(schema, dict) else {}
    variants = prop.get("oneOf")
    is_union = isinstance(variants, list)
    pieces: list[Piece] = []
    if isinstance(prop.get("title"), str):
        pieces += _comment(indent, prop["title"], f"{path}.title")
        pieces.append((f"{indent}//\n", None))
    description = prop.get("description") if isinstance(prop.get("description"), str) else None
    if is_union:
        pieces += _examples(indent, prop, path)
        first = variants[0] if variants and isinstance(variants[0], dict) else {}
        if description is not None and first.get("description") != description:
            pieces += _comment(indent, description, f"{path}.description")
        if "default" in prop:
            pieces += [(f"{indent}// default: ", None)]
            pieces += [(_default_text(prop), f"{path}.default"), ("\n", None)]
    else:
        if description is not None:
            pieces += _comment(indent, description, f"{path}.description")
        pieces += _examples(indent, prop, path)
    pieces += [(indent, None), (key, path)]
    if not is_required:
        pieces.append(("?", f"{parent}.required"))
    if is_union:
        pieces.append((":", None))
        pieces += _variant_pieces(variants, indent, path, in_property=True, owner=description)
        pieces.append((f"\n{indent},\n", None))
        return pieces
    pieces.append((": ", None))
    pieces += _nullable(schema_pieces(schema, indent + "    ", path), prop, path)
    pieces.append((",", None))
    if "default" in prop:
        pieces += [(" // default: ", None), (_default_text(prop), f"{path}.default")]
    pieces.append(("\n", None))
    return pieces


def _variant_pieces(
    variants: list[Any], indent: str, path: str, in_property: bool, owner: str | None = None
) -> list[Piece]:
    """A `oneOf` list; a property's own list hides descriptions its comment already gave."""
    pieces: list[Piece] = []
    for index, variant in enumerate(variants):
        variant_path = f"{path}.oneOf[{index}]"
        pieces.append((f"\n{indent} | ", None))
        pieces += _nullable(schema_pieces(variant, indent + "   ", variant_path), variant, path)
        prop = variant if isinstance(variant, dict) else {}
        comments: list[list[Piece]] = []
        description = prop.get("description")
        if isinstance(description, str) and (
            not in_property or owner is None or (index > 0 and description != owner)
        ):
            comments.append([(description, f"{variant_path}.description")])
        if "default" in prop:
            text = _default_text(prop, enum_as_json=not in_property)
            comments.append([("default: ", None), (text, f"{variant_path}.default")])
        if comments:
            pieces.append((" // ", None))
            for position, comment in enumerate(comments):
                pieces += [(" ", None), *comment] if position else comment
    return pieces


def _nullable(pieces: list[Piece], schema: Any, path: str) -> list[Piece]:
    nullable = isinstance(schema, dict) and schema.get("nullable") is True
    if nullable and "null" not in "".join(text for text, _ in pieces):
        pieces.append((" | null", f"{path}.nullable"))
    return pieces


def _comment(indent: str, text: str, path: str) -> list[Piece]:
    return [(f"{indent}// ", None), (text, path), ("\n", None)]


def _examples(indent: str, prop: dict[str, Any], path: str) -> list[Piece]:
    examples = prop.get("examples")
    if not isinstance(examples, list) or not examples:
        return []
    pieces: list[Piece] = [(f"{indent}// Examples:\n", None)]
    for index, example in enumerate(examples):
        if isinstance(example, str):
            pieces += [(f'{indent}// - "', None), (example, f"{path}.examples[{index}]")]
            pieces.append(('"\n', None))
    return pieces


def _joined(items: list[Piece], separator: str) -> list[Piece]:
    pieces: list[Piece] = []
    for index, item in enumerate(items):
        if index:
            pieces.append((separator, None))
        pieces.append(item)
    return pieces


def _default_text(prop: dict[str, Any], enum_as_json: bool = False) -> str:
    """Strings in raw quotes; an enum's string default bare (or as JSON in nested unions)."""
    value = prop["default"]
    if not isinstance(value, str):
        return compact_json(value)
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        return compact_json(value) if enum_as_json else value
    return f'"{value}"'


def _lines(text: str) -> list[str]:
    """Lines split at `\\n` or `\\r\\n`; a final line ending adds no empty line."""
    parts = text.split("\n")
    lines = [part.removesuffix("\r") for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines
