"""kafka-chaos: harness."""
