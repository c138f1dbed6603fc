"""Diagnostic codes, their documentation, and rendering findings into diagnostics."""
