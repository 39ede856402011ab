"""Replication to a standby: the follower that copies the event log byte for byte in whole
transactions (``follower``), reading the active store's log (``primary``) and writing the
standby with its position (``standby``). Imported by the application and the CLI; imports the
domain and the store."""

BATCH = 500  # events per standby transaction (the follower's default, and the CLI's)
