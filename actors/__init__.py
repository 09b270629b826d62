"""The live system: broker, namespace and leader actor bodies, their hosts (Ray, simulator) and the Cluster API."""
