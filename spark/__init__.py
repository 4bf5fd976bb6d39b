"""kafka-chaos: spark."""
