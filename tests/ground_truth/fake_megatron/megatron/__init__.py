"""Test-only fake of Megatron-LM (see ../README.md)."""
