"""kafka-chaos: Jepsen-style chaos testing for real Apache Kafka (KRaft) clusters.

The repository keeps one folder per part of a run (docs/architecture.md): ``cluster``, ``faults``,
``workloads``, ``checker``, ``reference_model``, ``spark``, ``report``, ``harness``. They are installed as
subpackages of this one namespace, so ``pip install kafka-chaos`` adds nothing else to site-packages.
"""

__version__ = "0.1.0"
