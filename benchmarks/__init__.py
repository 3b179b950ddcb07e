"""The course's benchmark (``make bench``, :mod:`benchmarks.bench`) and its runtime record (``make runtimes``)."""
