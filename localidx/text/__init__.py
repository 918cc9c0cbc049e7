"""Text helpers every step shares: safe text, token counts, identifier words."""
