"""The file store: journals, fsio, derived data, caches, locks, crash and concurrency stress."""
