"""One small async adapter per service, over the official clients.

`Endpoints` is the only thing that knows whether they talk to Google Cloud or the sandbox.
Heavy client libraries are imported inside the functions that build clients, never at import.
"""
