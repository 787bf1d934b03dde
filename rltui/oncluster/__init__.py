"""Code that runs on the cluster, not in rltui: shipped in a ConfigMap (see manifests_supervisor)."""
