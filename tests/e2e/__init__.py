"""End to end on the REAL host CLIs (marker hosts; wake-ups in tmux also tui)."""
