"""The pure domain layer: value types, messaging rules, record kinds, envelope folds.

Standard library only and cheap to import: the hooks use ``values``,
``kinds`` and ``envelope`` on every prompt, so those import nothing that
costs (no ``re``, ``dataclasses``, ``typing`` or ``uuid`` at run time).
"""
