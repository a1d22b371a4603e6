"""Writes to eval sets and their cases: imports, versions, captures."""
