"""kafka-chaos: workloads."""
