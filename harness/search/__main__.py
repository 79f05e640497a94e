"""``python -m scalerl.harness.search WORKER.json``: one local search worker (see
:mod:`scalerl.harness.search.worker`)."""

import sys

from scalerl.harness.search.worker import main

sys.exit(main())
