"""The run's fault windows, as the checker reads them: the pairing itself is faults.windows."""

from kafka_chaos.faults.windows import FaultWindow, FaultWindows, faults_from_history

__all__ = ["FaultWindow", "FaultWindows", "faults_from_history"]
