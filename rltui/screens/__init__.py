"""One module per wizard screen, in the codelab's order (see app.PAGES)."""
