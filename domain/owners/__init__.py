"""Who owns each schedule across both systems: the ownership audit (classify.py: one pure
row per key; audit.py: the recorded audit; resolve.py: the command that resolves a drift)."""
