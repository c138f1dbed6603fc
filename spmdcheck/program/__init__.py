"""Whole-program structure: the module graph of the checked files."""
