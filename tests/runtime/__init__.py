"""Background helpers: the renderer (deliveries ahead), the mirror, wake-ups and the doorbell."""
