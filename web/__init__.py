"""The web service beside a cluster: Pulsar's admin and lookup REST paths, the project's own reads.

``create_app(cluster)`` builds the aiohttp application over one ``actors.api.Cluster`` (the one
client face: every handler is a call on it, no verb is re-implemented here); ``serve`` runs it
on a port; ``lbctl run --web-service-port`` starts it beside a cluster.
"""
