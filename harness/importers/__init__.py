"""Curve importers: W&B panel CSV exports, TensorBoard event files, parsed-log CSVs, verl metrics
JSON lines.

``read_curves(path)`` auto-detects the format; ``IMPORTERS`` / ``get_importer(name)`` pick one.
:mod:`harness.importers.ingest` writes imported curves into the results store.
"""

from harness.importers.base import CurveImporter, ImportedCurve, detect, get_importer, read_curves

__all__ = ["CurveImporter", "ImportedCurve", "detect", "get_importer", "read_curves"]
