"""rltui: the codelab "Scale RL with GKE and Managed Lustre" as a wizard and a CLI."""

__version__ = "0.1.0"
