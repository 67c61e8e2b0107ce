"""Small statistics over sequences of numbers."""
