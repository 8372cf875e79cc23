"""Policies: `load(uri)` returns a Policy (see evo/policies/base.py)."""
