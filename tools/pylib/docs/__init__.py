"""The documentation's generated parts: docs/REFERENCE.md from the programs' --help."""
