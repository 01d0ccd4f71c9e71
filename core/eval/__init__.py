"""Evaluation: scores, data sets, per-question runs, caches and reports for `tacit eval`."""
