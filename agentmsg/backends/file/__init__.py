"""The plain-file backend: hash-chained JSONL journals under one state root.

Lean: the hooks import it on every prompt (no ``pathlib``, ``json``, ``re``,
``typing`` or ``dataclasses`` at run time).
"""
