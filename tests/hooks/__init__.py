"""The hooks as the hosts run them: hooks/run, its fast path, mid-turn delivery, host detection."""
