"""kafka-chaos: faults."""
