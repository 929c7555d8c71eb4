"""What a cluster-file job is made of: the cluster file, the release bundle shipped to hosts,
each role's command on its host, and the stores remote hosts leave results in."""
