"""The real-browser test (make test-browser): a package, so that its conftest does not shadow tests/conftest.py."""
