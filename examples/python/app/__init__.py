"""Example Python kinds for lagless's python module (see README.md beside this package)."""
