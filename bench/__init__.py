"""Benchmarks: quality (BEIR nDCG@10) and speed (latency percentiles). Print JSON.

Never run by the test suite. Datasets are read from a path given on the command line
(``../shared/data/...``) and never copied into the repository.
"""
