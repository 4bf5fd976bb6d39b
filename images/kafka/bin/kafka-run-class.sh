#!/bin/sh
# Thin launcher at the official image's path: java with every jar of /opt/kafka/libs on the classpath.
# Honours KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_LOG4J_OPTS, KAFKA_OPTS and LOG_DIR like Kafka's own.
base_dir=/opt/kafka
[ -n "$KAFKA_HEAP_OPTS" ] || KAFKA_HEAP_OPTS="-Xmx256M"
[ -n "$KAFKA_JVM_PERFORMANCE_OPTS" ] || KAFKA_JVM_PERFORMANCE_OPTS="-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true"
[ -n "$LOG_DIR" ] || LOG_DIR="$base_dir/logs"
[ -n "$KAFKA_LOG4J_OPTS" ] || KAFKA_LOG4J_OPTS="-Dlog4j2.configurationFile=$base_dir/config/log4j2.properties"
# Class-data sharing: the server and the storage tool map the archive the image build trained for them
# (train-cds.sh); none when the image has none, or while training (KAFKA_CDS_ARCHIVE=none).
CDS_OPTS=""
case "${KAFKA_CDS_ARCHIVE:-}:$1" in
  :kafka.Kafka) cds="$base_dir/cds/server.jsa" ;;
  :kafka.tools.StorageTool) cds="$base_dir/cds/storage.jsa" ;;
  *) cds="" ;;
esac
[ -n "$cds" ] && [ -f "$cds" ] && CDS_OPTS="-XX:SharedArchiveFile=$cds"
# shellcheck disable=SC2086
exec java $CDS_OPTS $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS -Dkafka.logs.dir="$LOG_DIR" $KAFKA_LOG4J_OPTS $KAFKA_OPTS \
  -cp "$base_dir/libs/*" "$@"
