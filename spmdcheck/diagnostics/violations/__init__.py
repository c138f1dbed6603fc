"""Every code's violation, one class per code, by rule family (ruff's rules/<family>/rules/*.rs).

A new code is: its entry in codes.py, its violation here (fields, message, fix title), its page in
pages/, its fixtures, and the place in the analysis that detects it and reports the violation.

Nothing is imported here: a reader of cached results that reports an unused suppression loads
`inputs` alone, not every family (nor the lattice). `registry` lists them all.
"""
