"""Plumbing: configuration, output files, the simulation runner and the command line."""
