"""Operator read models, fed from the event log with tracking (each event applied exactly once):
the tables (``tables``), the projection and its recorder (``projection``, ``view``), the runner
(``runner``), the queries (``queries``, the audit's ``audit_query``), on-call advice
(``oncall``), the views one store offers (``service_views.OperatorViews``) and the one narration
of events (``narration``). Imports the domain only; the application hands it the engine on the
store's database."""
