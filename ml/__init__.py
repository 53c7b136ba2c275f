"""The maths: models, optimisers, metrics, devices (no protocol, no I/O)."""
