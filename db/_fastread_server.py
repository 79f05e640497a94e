"""The ADBC helper process behind :mod:`db.fastread` (run as a script; imports nothing from db).

Protocol: one JSON request per stdin line ``{"path", "sql", "params"}``; the answer on stdout is
an 8-byte little-endian signed length, then that many bytes: an Arrow IPC stream, or (negative
length) an error message. Exits when stdin closes.
"""

from __future__ import annotations

import json
import struct
import sys
import urllib.parse

_HEADER = struct.Struct("<q")


def serve() -> None:
    import adbc_driver_sqlite.dbapi as adbc
    import pyarrow as pa

    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        req = json.loads(line)
        try:
            # Read-only: the helper must never write (or create) the store.
            uri = "file:" + urllib.parse.quote(req["path"]) + "?mode=ro"
            with adbc.connect(uri) as conn, conn.cursor() as cur:
                # One Arrow batch for the whole answer: the default 1024-row batches cost ~2x.
                cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(1 << 22)})
                cur.execute(req["sql"], parameters=tuple(req["params"]))
                table = cur.fetch_arrow_table()
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as ipc:
                ipc.write_table(table)
            payload = sink.getvalue()
            out.write(_HEADER.pack(payload.size))
            out.write(payload)  # an Arrow buffer: written without a copy into Python bytes
        except Exception as err:
            msg = f"{type(err).__name__}: {err}".encode()
            out.write(_HEADER.pack(-len(msg)) + msg)
        out.flush()


if __name__ == "__main__":
    serve()
