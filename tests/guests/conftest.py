"""Tier 6: the package's DEP-8 tests (debian/tests) in booted Debian 12 and 13 guests with their own kernels,
run by autopkgtest's QEMU backend (tests/guests/images.py). Needs root, QEMU and autopkgtest; elsewhere the
tier is skipped with the reason printed, and under CI (CI=true) it fails instead."""
