"""Where operators already look: Prometheus metrics (``metrics``), destination call latency
(``calls``) and structured logs (``logs``)."""
