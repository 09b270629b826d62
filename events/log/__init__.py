"""The EventLog port and its adapters: memory, local (embedded, file-backed) and Kafka."""
