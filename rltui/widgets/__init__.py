"""Widgets shared by the wizard's screens, grouped by feature."""
