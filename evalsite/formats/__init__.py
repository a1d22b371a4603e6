"""Date formats of the site (``FORMAT_MODULE_PATH``): one way to show a moment everywhere."""
