"""Tests of the hakmem lab (run by `make test` through pytest)."""
