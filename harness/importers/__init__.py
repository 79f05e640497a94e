"""Curve importers: W&B panel CSV exports, TensorBoard event files, parsed-log CSVs, verl metrics
JSON lines.

``read_curves(path)`` auto-detects the format; ``IMPORTERS`` / ``get_importer(name)`` pick one.
``read_file(path)`` also returns what the file lost (:class:`ImportLosses`, reasons and policies in
``LOSS_POLICY``); ``read_curves`` raises on any loss unless ``allow_partial=True``.
:mod:`scalerl.harness.importers.ingest` writes imported curves into the results store;
:mod:`scalerl.harness.importers.axis` places curves on a compute axis the runs log as a metric.
"""

from scalerl.harness.importers.base import (
    LOSS_POLICY,
    CurveImporter,
    ImportedCurve,
    ImportLosses,
    ImportResult,
    detect,
    get_importer,
    read_curves,
    read_file,
)

__all__ = [
    "LOSS_POLICY",
    "CurveImporter",
    "ImportLosses",
    "ImportResult",
    "ImportedCurve",
    "detect",
    "get_importer",
    "read_curves",
    "read_file",
]
