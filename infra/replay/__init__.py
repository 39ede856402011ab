"""Replay: re-derive every step of a key's migrations from its history alone (``replayer``, also the
offline, read-only service over an existing store) and narrate why each decision followed
(``explain``). Imported by the application and the CLI; imports the domain and the store."""
