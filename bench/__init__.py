"""Benchmarks of umt against OpenWorkflow (peer-bench). Never run by the test command."""
