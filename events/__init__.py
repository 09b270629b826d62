"""What happened, how it is encoded and where it is stored: the event catalog, envelope, codec and log adapters.

Dependency direction: events imports balancer only."""
