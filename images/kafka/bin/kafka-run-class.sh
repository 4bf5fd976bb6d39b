#!/bin/sh
# Thin launcher at the official image's path: java with every jar of /opt/kafka/libs on the classpath.
# Honours KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_LOG4J_OPTS, KAFKA_OPTS and LOG_DIR like Kafka's own.
base_dir=/opt/kafka
[ -n "$KAFKA_HEAP_OPTS" ] || KAFKA_HEAP_OPTS="-Xmx256M"
[ -n "$KAFKA_JVM_PERFORMANCE_OPTS" ] || KAFKA_JVM_PERFORMANCE_OPTS="-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true"
[ -n "$LOG_DIR" ] || LOG_DIR="$base_dir/logs"
[ -n "$KAFKA_LOG4J_OPTS" ] || KAFKA_LOG4J_OPTS="-Dlog4j2.configurationFile=$base_dir/config/log4j2.properties"
# shellcheck disable=SC2086
exec java $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS -Dkafka.logs.dir="$LOG_DIR" $KAFKA_LOG4J_OPTS $KAFKA_OPTS \
  -cp "$base_dir/libs/*" "$@"
