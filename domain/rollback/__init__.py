"""The rollback: one fenced handoff of a schedule from the source to a Temporal Schedule.
``aggregate`` is the ``Migration`` (events, state, evolve); ``steps`` turns each command and
task step into one ``Change`` over the source and the migration, saved in one append; the
decisions it uses are ``decide`` (gates, answers, chain checks), ``observe`` (what a reading
of the destination proves), ``evidence`` (absence inside retention), ``recover`` (operator
recovery) and ``handover`` / ``handover_gone`` (what the destination is handed, and its
settle)."""
