"""The differential fuzzer: random command sequences on rill and redis-server at once
(generator), reply and dataset comparison (runner), delta debugging (shrink) and a
redis-cli transcript of what remains (transcript). ``python -m tests.fuzz --help``."""
