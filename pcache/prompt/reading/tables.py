"""Parquet and CSV tables whose column holds request bodies (or recorder lines) as JSON text.

`table.parquet` reads the first column whose first value looks like JSON (`{...}`);
`table.parquet#body` names the column (as `--column body` does, `with_column`). Rows are
streamed a batch at a time (Parquet by row group, each with its own reader, CSV by block), so
memory does not grow with the row count. A row's "line" is its row number counted from 1 (for
CSV, the file line when no cell spans lines: the header is line 1).
Needs pyarrow (`pip install 'pcache[tables]'`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from pcache.errors import InputError, OptionError
from pcache.files import display_name
from pcache.prompt.reading.document import Document, json_error

TABLE_SUFFIXES = (".parquet", ".pq", ".csv")
BATCH_ROWS = 4096


def split_column(path: str | os.PathLike[str]) -> tuple[str, str | None]:
    """(file, column) of `file#column` (a file whose own name holds `#` is taken whole)."""
    text = os.fspath(path)
    if "#" in text and not Path(text).exists():
        file, _, column = text.rpartition("#")
        return file, column or None
    return text, None


def with_column(path: str, column: str | None) -> str:
    """`path` read from `column` (`--column`) when it is a table; other paths as they are.
    A table path naming another column (`table.csv#other`) is a usage error."""
    if column is None or not is_table(path):
        return path
    file, own = split_column(path)
    if own is not None and own != column:
        raise OptionError("column", f"{column} and {path} name different columns")
    return f"{file}#{column}"


def with_columns(paths: list[str], column: str | None) -> list[str]:
    """`with_column` of each path; naming a column with no table among `paths` is a usage
    error (directories: `pcache.rules.runner.find_inputs`)."""
    if column is None:
        return list(paths)
    if not any(is_table(path) for path in paths):
        raise OptionError(
            "column", f"{column}: no table input (.parquet, .pq, .csv) to read it from"
        )
    return [with_column(path, column) for path in paths]


def pyarrow_available() -> bool:
    """Whether the tables extra is installed (a directory search includes tables only then)."""
    from importlib.util import find_spec

    return find_spec("pyarrow") is not None


NEEDS_PYARROW = "reading Parquet and CSV tables needs pyarrow (pip install 'pcache[tables]')"


def is_table(path: str | os.PathLike[str]) -> bool:
    if str(path) == "-":
        return False
    return split_column(path)[0].lower().endswith(TABLE_SUFFIXES)


def _pyarrow(source: str) -> Any:
    try:
        import pyarrow
    except ImportError:
        raise InputError(source, NEEDS_PYARROW) from None
    return pyarrow


def _batches(file: str, source: str) -> tuple[Any, Iterator[Any], int]:
    """The schema, the record batches and the line number of the first row."""
    _pyarrow(source)
    import pyarrow as pa

    try:
        if file.lower().endswith(".csv"):
            import pyarrow.csv as csv

            _check_csv_text(file, source)
            reader = csv.open_csv(file, read_options=csv.ReadOptions(block_size=1 << 22))
            list(reader.schema.names)  # header names that are not UTF-8 fail here, not later
            return reader.schema, iter(reader), 2
        import pyarrow.parquet as parquet

        table = parquet.ParquetFile(file)
        return table.schema_arrow, _row_group_batches(table), 1
    except FileNotFoundError:
        raise InputError(source, "no such file or directory") from None
    except (pa.ArrowException, OSError, UnicodeDecodeError) as error:
        raise InputError(source, f"cannot read the table: {str(error).splitlines()[0]}") from None


def _check_csv_text(file: str, source: str) -> None:
    """A CSV file in UTF-16 or UTF-32 is named as such, as a JSON file is."""
    from pcache.prompt.reading.text_encoding import SNIFF_BYTES, check_text

    with open(file, "rb") as handle:
        head = handle.read(SNIFF_BYTES)
    check_text(head, source)


def _row_group_batches(table: Any) -> Iterator[Any]:
    """The record batches of a Parquet file, one row group's reader at a time. One reader over
    the whole file holds on to memory of the row groups it has read until it is done (pyarrow
    26.0.1, `bench/table_rss.py`'s 1,000,000-row table, 8 MiB compressed per 50,000-row group:
    its pool grows from 34 MiB to 172 MiB, 24 MiB every third group); a reader per group stays
    at 18 MiB."""
    for group in range(table.num_row_groups):
        yield from table.iter_batches(batch_size=BATCH_ROWS, row_groups=[group])


def _text_columns(schema: Any) -> list[str]:
    import pyarrow as pa

    kinds = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary)
    return [f.name for f in schema if any(kind(f.type) for kind in kinds)]


def _looks_json(value: Any) -> bool:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return isinstance(value, str) and value.lstrip().startswith("{")


def iter_table_documents(
    path: str | os.PathLike[str], *, skip_errors: bool = False
) -> Iterator[Document | InputError]:
    file, column = split_column(path)
    source = display_name(file)
    schema, batches, first_line = _batches(file, source)
    names = list(schema.names)
    if column is not None and column not in names:
        raise InputError(source, f"has no column {column!r} (columns: {', '.join(names)})")
    line = first_line
    for batch in batches:
        if column is None:
            column = _guess_column(batch, _text_columns(schema), source)
        for cell in batch.column(names.index(column)).to_pylist():
            number, line = line, line + 1
            if cell is None:
                continue
            raw = cell if isinstance(cell, bytes) else str(cell).encode()
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError as error:
                failure = json_error(raw, error, source, number)
                failure.message = f"column {column!r}: {failure.message}"
                if not skip_errors:
                    raise failure from None
                yield failure
                continue
            yield Document(source, number, value, raw)
    if line == first_line:
        raise InputError(source, "the table has no rows")


def _guess_column(batch: Any, candidates: list[str], source: str) -> str:
    for name in candidates:
        values = batch.column(batch.schema.names.index(name))
        first = next((value for value in values.to_pylist() if value is not None), None)
        if _looks_json(first):
            return name
    raise InputError(
        source,
        "no column holds JSON request bodies (name one: --column NAME or FILE#COLUMN;"
        f" text columns: {', '.join(candidates) or 'none'})",
    )
