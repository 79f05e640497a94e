"""The ADBC helper process behind :mod:`scalerl.db.fastread` (run as a script; imports nothing from db).

Protocol: one JSON request per stdin line ``{"path", "parts": [[[sql, params], ...], ...]}``.
Each part's queries run on their own read-only connection inside one read transaction (one
snapshot, so a count query and the rows it counts agree); the parts run in parallel threads (the
driver releases the GIL while it steps SQLite, so two parts take ~half the time on two cores).
The answer on stdout is, per query in request order, an 8-byte little-endian signed length then
that many bytes of Arrow IPC stream; or, on any error, one frame with a negative length and the
error message. Exits when stdin closes.

Interrupts: the helper ignores SIGINT (a Ctrl-C or a notebook kernel interrupt is meant for its
parent, which ends it by closing its stdin), so no stray KeyboardInterrupt traceback appears and
the parent's next query still finds it alive.
"""

from __future__ import annotations

import json
import signal
import struct
import sys
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_HEADER = struct.Struct("<q")


def _run_part(uri: str, queries: list[list[Any]]) -> list[Any]:
    import adbc_driver_sqlite.dbapi as adbc

    tables = []
    # autocommit off: the driver opens one transaction, so the part's queries see one snapshot.
    with adbc.connect(uri, autocommit=False) as conn, conn.cursor() as cur:
        # One Arrow batch for the whole answer: the default 1024-row batches cost ~2x.
        cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(1 << 22)})
        for sql, params in queries:
            cur.execute(sql, parameters=tuple(params))
            tables.append(cur.fetch_arrow_table())
        conn.rollback()
    return tables


def serve() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import pyarrow as pa

    out = sys.stdout.buffer
    with ThreadPoolExecutor(max_workers=4) as pool:
        for line in sys.stdin.buffer:
            req = json.loads(line)
            try:
                # Read-only: the helper must never write (or create) the store.
                uri = "file:" + urllib.parse.quote(req["path"]) + "?mode=ro"
                futures = [pool.submit(_run_part, uri, part) for part in req["parts"]]
                tables = [t for f in futures for t in f.result()]
                payloads = []
                for table in tables:
                    sink = pa.BufferOutputStream()
                    with pa.ipc.new_stream(sink, table.schema) as ipc:
                        ipc.write_table(table)
                    payloads.append(sink.getvalue())
                for payload in payloads:
                    out.write(_HEADER.pack(payload.size))
                    out.write(payload)  # an Arrow buffer: written without a copy into Python bytes
            except Exception as err:
                msg = f"{type(err).__name__}: {err}".encode()
                out.write(_HEADER.pack(-len(msg)) + msg)
            out.flush()


if __name__ == "__main__":
    serve()
