"""kafka-chaos: reference_model."""
