"""A worker program for the multi-process tests: ``python -m tests.engine.procs.worker``."""
