"""Benchmarks: the product side by side with what a lab would otherwise use, on real and simulated data.

Run each from the repository root as a module, ``python -m bench.<name> [options]`` (``--help``
lists them); results go to bench/README.md with the command, date and machine. Shared pieces:
:mod:`bench.data` (the real RL curves, one loader for every benchmark) and :mod:`bench.provenance`
(the date / machine / command header every result carries).
"""
