"""Clusters emulated on this machine (network namespaces, shaped links) and long soak runs."""
