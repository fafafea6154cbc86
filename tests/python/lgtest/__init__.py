"""Callables the python job module's integration tests name (tests/integration/test_python_module.py)."""
