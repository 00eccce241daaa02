"""The pipeline itself, pure: the five stages' fields, layers, ``--set`` and ``--vary``, hashing and the card,
and the value types that pass between stages (question -> request -> generation -> extraction -> score -> record)."""
