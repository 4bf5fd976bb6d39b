#!/bin/sh
[ -n "$KAFKA_HEAP_OPTS" ] || export KAFKA_HEAP_OPTS="-Xmx1G -Xms1G"
exec "$(dirname "$0")/kafka-run-class.sh" kafka.Kafka "$@"
