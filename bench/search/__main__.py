"""``python -m bench.search``: the default table (:mod:`bench.search.table`)."""

from bench.search.table import main

if __name__ == "__main__":
    main()
