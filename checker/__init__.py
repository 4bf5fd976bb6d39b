"""kafka-chaos: checker."""
