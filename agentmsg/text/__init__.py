"""Pure text for people and models: escapes, the untrusted boundary, transcripts, heuristics, secrets."""
