"""The domain: every protocol rule, with no I/O. One folder per aggregate or process, each
module reading as events, state, evolve, decisions:

- ``source/``: the embedded scheduler, one ``Schedule`` aggregate per incarnation of a key
  (``schedule``, its state and guards in ``state``, its runs in ``runs``), the key
  (``key``), what it runs (``program``, ``spec``, ``action``, ``payload``) and how it runs it
  (``generator``, ``invoker``, ``scheduling``, ``manual``, ``incarnation``).
- ``rollback/``: one handoff from the source to a Temporal Schedule: the ``Migration``
  aggregate (``aggregate``, its phase words in ``phases``, upcasters in ``upcasts``), each
  command and task step as one ``Change`` over both aggregates (``steps``), the decisions
  they are built on (``decide``, ``observe``, ``evidence``, ``recover``) and what is handed
  over (``handover``, ``handover_gone``).
- ``forward/``: the way back, a Temporal Schedule handed to the source (``aggregate``,
  ``steps``, ``boundary``).
- ``invariants/``: the checker over whole histories (``checker`` and its ledgers).

The shared words stay at the top: the pydantic aggregate base (``model``), errors, ids and
input rules (``ids``, ``text``, ``bounds``), the ports a destination implements (``ports``),
the one step vocabulary both engines dispatch on (``process``), directions (``direction``),
the read shape (``read_shape``), the batch job (``job``), the store's epoch (``failover``)
and every stored topic with the module defining it (``topics``). ``spec.py`` and
``action.py`` here only re-export ``source/`` for one release. Imports nothing of ours."""
