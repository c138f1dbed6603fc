"""Rules as data: the stub loader and the registry it builds."""
