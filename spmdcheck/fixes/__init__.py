"""Fixes: applied to a file as a transaction (apply), in rounds with a re-check between them (rounds), and
`# noqa` comments added (noqa)."""
