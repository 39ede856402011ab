"""The domain: every protocol rule, with no I/O. Aggregates and their versioned pydantic events
(``schedule``: the source, ``migration``: one handoff, ``failover``: the store's epoch), each
folded by a pure reducer; the decisions (``handoff``: each command and task step over both
aggregates, built on ``decisions``, ``recovery`` and the source's rules in ``schedule``); the
one step vocabulary the rollback and forward engines dispatch on (``process``); the
invariant checker over whole histories (``invariants``); the ports a destination implements
(``ports``); ids and input rules (``ids``, ``text``); every stored topic and the module
that defines it (``topics``). Imports nothing of ours."""
