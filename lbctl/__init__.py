"""lbctl: the command line (pulsar-admin-like verbs plus run, decide, replay, sim and bench)."""
