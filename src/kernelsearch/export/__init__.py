"""Export verified kernels from run archives as a training dataset (JSON Lines or Parquet).

``export_rows(run_dir)`` yields one dict per (run, kernel); ``write(rows, path)`` writes them.
The columns are described by ``rows.SCHEMA`` and in docs/formats.md.
"""

from __future__ import annotations

from kernelsearch.export.rows import COLUMNS, SCHEMA, export_rows, run_rows
from kernelsearch.export.writers import ExportError, format_for, write
from kernelsearch.search.store import run_dirs  # the one run-directory discovery, re-exported

__all__ = ["COLUMNS", "SCHEMA", "ExportError", "export_rows", "format_for", "run_dirs", "run_rows", "write"]
