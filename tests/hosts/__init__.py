"""Host adapters without the real hosts: installers, manifests, plugin files, Cursor, OpenCode, Gemini launch."""
