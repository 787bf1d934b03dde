"""The sandbox: a local emulated project that the official clients cannot tell from the cloud."""
