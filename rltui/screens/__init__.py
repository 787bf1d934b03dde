"""One module per wizard screen, in the codelab's order: the wizard's pages."""

# (mode, title, module, class, key)
SCREENS: list[tuple[str, str, str, str, str]] = [
    ("start", "Start", "start", "StartScreen", "f2"),
    ("configure", "Configure", "configure", "ConfigureScreen", "f3"),
    ("provision", "Provision", "provision", "ProvisionScreen", "f4"),
    ("job", "Job", "job", "JobScreen", "f7"),
    ("monitor", "Monitor", "monitor", "MonitorScreen", "f8"),
    ("metrics", "Metrics", "metrics", "MetricsScreen", "f9"),
    ("teardown", "Teardown", "teardown", "TeardownScreen", "f10"),
]
PAGES = [(mode, title) for mode, title, *_ in SCREENS]
