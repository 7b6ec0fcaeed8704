"""The benchmarks behind docs/benchmarks.md, each a ``python -m netblt.bench.NAME``
script that prints its figures (the Makefile's ``bench-*`` targets run them). They sit
on top of every other layer."""
