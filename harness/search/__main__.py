"""``python -m harness.search WORKER.json``: one local search worker (see harness.search.worker)."""

import sys

from harness.search.worker import main

sys.exit(main())
