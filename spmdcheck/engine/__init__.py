"""The driver: plan a run, analyse its programs (on worker processes), record and cache their results."""
