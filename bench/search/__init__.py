"""Search benchmark: pruners side by side on replayed real RL curves, one module per experiment.

Trials are real curves (:mod:`bench.data`) grouped into pools a search would compare at one budget
(:mod:`bench.search.pools`); a study replays a pool with one sampler, seed and pruner
(:mod:`bench.search.replay`). Shared: the pruner settings the experiments grid and the synthetic
guard (:mod:`bench.search.settings`), the memoising forecaster every forecast pruner of a process is
given (:mod:`bench.search.memo`), calibrations fitted without the held-out source
(:mod:`bench.search.calibrations`), scoring and the selection criterion (:mod:`bench.search.scoring`).

Experiments (run from the repository root; each prints markdown for bench/README.md, "Search"):

- ``python -m bench.search [--seeds 5]`` (:mod:`bench.search.table`): every pruner on every pool;
- ``python -m bench.search.loso --jobs 2``: the bound rule's settings chosen leave-one-source-out;
- ``python -m bench.search.beat --jobs 2``: the beat rule's, the same way;
- ``python -m bench.search.ties``: how much of "best pruned" is noise (no forecasts);
- ``python -m bench.search.reliability --jobs 2``: P(beat) against outcomes.
"""
