"""The ground-truth execution harness: run programs on N gloo ranks and judge spmdcheck's verdicts.

Modules: ``spec`` (read a program: mesh, typed ``step``, GLOBAL_SHAPES), ``layout`` (per-rank blocks and
their reassembly), ``pool`` (persistent rank processes), ``worker`` (what a rank runs), ``harness``
(reference, N-rank runs, comparison, spmd-types' runtime checker), ``corpus`` and ``sweep`` (the fixtures),
``fake_megatron`` (test-only Megatron mappings). See docs/ground_truth.md.
"""
