"""The source: a CHASM-style schedule embedded in the store. Its aggregates (``schedule``:
one per incarnation of a key, ``key``: which incarnation is current), what a schedule runs
(``program``, ``spec``, ``action``, ``payload``) and the scheduler's pure decisions
(``generator``: which times are due, ``invoker``: what overlap allows, ``scheduling``: a
pass over one schedule, ``manual``: a user's changes, ``incarnation``: when a key may begin
again)."""
