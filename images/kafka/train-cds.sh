#!/bin/sh
# Run at image build: start this image's Kafka once (format, then a single-node server until it has started,
# then a clean shutdown), each JVM dumping the classes it loaded into a class-data sharing archive that the
# launcher maps at every later start (kafka-run-class.sh). A node's JVMs then load their classes from the mapped
# archive instead of parsing and verifying them from the jars: the same classes, found faster.
set -eu
work=/tmp/cds-train
mkdir -p "$work"
cat > "$work/server.properties" <<P
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
advertised.listeners=PLAINTEXT://localhost:9092
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$work/data
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
P
export KAFKA_HEAP_OPTS="-Xms128m -Xmx384m" KAFKA_CDS_ARCHIVE=none
KAFKA_OPTS="-XX:ArchiveClassesAtExit=/opt/kafka/cds/storage.jsa" \
  kafka-storage.sh format -t MkU3OEVBNTcwNTJENDM2Qg -c "$work/server.properties" >/dev/null
KAFKA_OPTS="-XX:ArchiveClassesAtExit=/opt/kafka/cds/server.jsa" \
  kafka-server-start.sh "$work/server.properties" > "$work/server.log" 2>&1 &
pid=$!  # java itself: the launchers exec
i=0
until grep -q "Kafka Server started" "$work/server.log"; do
  i=$((i + 1))
  if [ "$i" -gt 600 ] || ! kill -0 "$pid" 2>/dev/null; then
    tail -40 "$work/server.log" >&2; kill -9 "$pid" 2>/dev/null; exit 1
  fi
  sleep 0.2
done
( sleep 120; kill -9 "$pid" 2>/dev/null ) &  # a shutdown that hangs ends the training, not the build
watchdog=$!
kill -TERM "$pid"  # a clean exit: the JVM writes its archive as it exits
wait "$pid" || true
kill "$watchdog" 2>/dev/null || true
# the archives must map: one a JVM cannot use fails the training here (the image then has none), not silently later
for a in storage server; do
  java -Xshare:on -XX:SharedArchiveFile=/opt/kafka/cds/$a.jsa -cp "/opt/kafka/libs/*" -version >/dev/null
done
rm -rf "$work"
