"""Benchmarks (`make bench`): every figure is a ratio against a baseline from the same run."""
