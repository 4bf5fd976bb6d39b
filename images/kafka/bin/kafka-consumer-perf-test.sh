#!/bin/sh
[ -n "$KAFKA_HEAP_OPTS" ] || export KAFKA_HEAP_OPTS="-Xmx512M"
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.ConsumerPerformance "$@"
