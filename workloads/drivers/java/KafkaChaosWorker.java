// kafka-chaos's out-of-process worker for the Apache Kafka Java client (docs/architecture.md, client drivers).
//
// It hosts one history process's producers and consumers by handle and speaks the client worker line protocol:
// one JSON object per line, requests on stdin, replies and events on stdout, client logs on stderr. Compiled
// against whichever kafka-clients version a run chose, so it names exceptions by class name rather than by
// class (a class a version lacks must not break the build) and uses only API that exists from 2.x on.
//
// JSON is read and written by the small hand-written code at the bottom: the messages are a few flat objects,
// and a JSON library would be one more set of jars to fetch, verify and keep compatible with every client.

import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;

public final class KafkaChaosWorker {
    static final long OFFSET_INVALID = -1001;  // librdkafka's "no position yet"
    static final long PROTOCOL_VERSION = 2;  // the harness's protocol.PROTOCOL_VERSION
    static final Object OUT_LOCK = new Object();
    // the protocol's channel (anything else printed goes to stderr); buffered here, flushed by emit or the flusher
    static final OutputStream OUT = new java.io.BufferedOutputStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), 1 << 16);
    static boolean unflushed;  // guarded by OUT_LOCK: lines written by emitLater and not yet flushed
    // the handles with delivery reports not written yet; written as one `deliveries` line per handle by the flusher
    // or before any other line, so a reply never overtakes the deliveries that came before it
    static final java.util.concurrent.ConcurrentLinkedQueue<Handle> REPORTING =
            new java.util.concurrent.ConcurrentLinkedQueue<>();
    static final Map<String, Handle> HANDLES = new ConcurrentHashMap<>();
    // poll and flush only wait, so they run beside a handle's client calls rather than queue behind them
    static final ExecutorService WAITERS = Executors.newCachedThreadPool(daemon("kc-wait"));
    static final ScheduledExecutorService TIMERS = Executors.newSingleThreadScheduledExecutor(daemon("kc-timer"));

    /** One client and the single thread its calls run on (KafkaConsumer is single-threaded; order matters). */
    static final class Handle {
        final String name;
        final ExecutorService exec;
        KafkaProducer<byte[], byte[]> producer;
        KafkaConsumer<byte[], byte[]> consumer;
        long pending;      // produce requests received whose delivery outcome is not known yet
        long deliveries;   // delivery outcomes so far: poll waits for this to move
        int polling;       // poll calls waiting for the next outcome
        int txnVersion;    // the transaction protocol last logged (0: none yet)
        // guarded by itself: the reports not written yet, as the JSON of a `deliveries` line's list without its
        // brackets. Written by the client's I/O thread (its callbacks), which must not wait on stdout's writer
        final StringBuilder reports = new StringBuilder();
        final AtomicBoolean flushing = new AtomicBoolean();  // one flush() thread at a time, however many ask

        Handle(String name) {
            this.name = name;
            this.exec = Executors.newSingleThreadExecutor(daemon("kc-" + name));
        }

        /** An outcome known: wakes a waiting poll, or a flush once nothing is pending. Not every outcome wakes
         *  the waiters: a flush waits for tens of thousands of them, and a wake-up per record costs the worker
         *  more than the record's send. */
        synchronized void delivered() {
            pending--;
            deliveries++;
            if (polling > 0 || pending <= 0) notifyAll();
        }
    }

    /** An exception with the reply's error fields already decided (bad requests, the worker's own timeouts). */
    static final class WorkerError extends RuntimeException {
        final String name;
        final boolean retriable;

        WorkerError(String name, String message, boolean retriable) {
            super(message);
            this.name = name;
            this.retriable = retriable;
        }
    }

    static java.util.concurrent.ThreadFactory daemon(String name) {
        return r -> {
            Thread t = new Thread(r, name);
            t.setDaemon(true);
            return t;
        };
    }

    public static void main(String[] args) throws Exception {
        System.setOut(System.err);  // a library's println must not break the protocol's lines
        Map<String, Object> ready = new LinkedHashMap<>();
        ready.put("event", "ready");
        ready.put("client", "java");
        ready.put("version", AppInfoParser.getVersion());
        ready.put("protocol", PROTOCOL_VERSION);
        emit(ready);
        TIMERS.scheduleAtFixedRate(KafkaChaosWorker::flushPending, FLUSH_MS, FLUSH_MS, TimeUnit.MILLISECONDS);
        Lines in = new Lines(new java.io.FileInputStream(java.io.FileDescriptor.in));
        while (in.next()) {
            if (Json.blank(in.buf, in.start, in.end)) continue;
            Map<String, Object> req;
            try {
                req = Json.object(Json.parse(in.buf, in.start, in.end));
            } catch (RuntimeException e) {
                System.err.println("kafka-chaos worker: unreadable request line: " + in.text());
                continue;
            }
            if (!(req.get("id") instanceof Number) || !(req.get("op") instanceof String)) {
                System.err.println("kafka-chaos worker: a request without an id or op: " + in.text());
                continue;
            }
            long id = ((Number) req.get("id")).longValue();
            String op = (String) req.get("op");
            if ("exit".equals(op)) {
                reply(id, null);
                System.exit(0);
            }
            try {
                dispatch(id, op, req);
            } catch (Throwable t) {
                replyError(id, t, op);
            }
        }
        System.exit(0);  // the harness went away
    }

    static void dispatch(long id, String op, Map<String, Object> req) throws Exception {
        if ("create".equals(op)) {
            reply(id, create(req));
            return;
        }
        Handle h = handle(req, "handle");
        switch (op) {
            case "poll":
                double timeout = seconds(req, "timeout", 0);
                if (timeout <= 0) {  // nothing to wait for: answered here, not after a handoff
                    reply(id, null);
                    return;
                }
                long seen;
                synchronized (h) {
                    seen = h.deliveries;  // on receipt: an outcome after this request ends it, however late it waits
                }
                WAITERS.submit(() -> run(id, op, () -> poll(h, timeout, seen), new AtomicBoolean()));
                return;
            case "flush":
                WAITERS.submit(() -> run(id, op, () -> flush(h, seconds(req, "timeout", 0)), new AtomicBoolean()));
                return;
            case "produce":
                synchronized (h) {
                    h.pending++;  // counted on receipt, so a flush read after this produce waits for it
                }
                h.exec.submit(() -> produce(id, h, req));
                return;
            case "produce_batch": {
                List<?> records = (List<?>) req.get("records");
                synchronized (h) {
                    h.pending += records.size();
                }
                h.exec.submit(() -> produceBatch(id, h, records));
                return;
            }
            default:
        }
        Callable<Object> call = call(h, op, req);
        AtomicBoolean answered = new AtomicBoolean();
        h.exec.submit(() -> run(id, op, call, answered));
        if (TXN_OPS.contains(op) && req.get("timeout") != null) {
            // the Java client's transactional calls are bounded by max.block.ms only; the request's timeout is
            // honoured here, as librdkafka does: a retriable _TIMED_OUT while the call goes on in the background
            TIMERS.schedule(() -> timedOut(id, answered), duration(seconds(req, "timeout", 0)).toMillis(),
                    TimeUnit.MILLISECONDS);
        }
    }

    static final Set<String> TXN_OPS = Set.of("init_transactions", "begin_transaction", "commit_transaction",
            "abort_transaction", "send_offsets_to_transaction");

    static Callable<Object> call(Handle h, String op, Map<String, Object> req) {
        switch (op) {
            case "init_transactions": return () -> { producer(h).initTransactions(); logTransactionVersion(h); return null; };
            case "begin_transaction": return () -> { producer(h).beginTransaction(); return null; };
            case "commit_transaction": return () -> { producer(h).commitTransaction(); logTransactionVersion(h); return null; };
            case "abort_transaction": return () -> { producer(h).abortTransaction(); return null; };
            case "send_offsets_to_transaction": return () -> sendOffsets(h, req);
            case "assign": return () -> assign(h, req);
            case "subscribe": return () -> { consumer(h).subscribe(strings(req.get("topics"))); return null; };
            case "consume": return () -> consume(h, ((Number) req.get("max")).intValue(), seconds(req, "timeout", 0));
            case "position": return () -> position(h, req);
            case "assignment": return () -> {
                List<Object> out = new ArrayList<>();
                for (TopicPartition tp : consumer(h).assignment()) out.add(List.of(tp.topic(), (long) tp.partition()));
                return out;
            };
            case "watermarks": return () -> watermarks(h, req);
            case "close": return () -> close(h);
            default: throw new WorkerError("_INVALID_ARG", "unknown op " + op, false);
        }
    }

    // --- replies -------------------------------------------------------------------------------------------------

    /** Runs a request's call and writes its reply, unless its timeout (which claims `answered` too) came first. */
    static void run(long id, String op, Callable<Object> call, AtomicBoolean answered) {
        Object value;
        try {
            value = call.call();
        } catch (Throwable t) {
            if (answered.compareAndSet(false, true)) replyError(id, t, op);
            else System.err.println("kafka-chaos worker: " + op + " " + id + " failed after its timeout: " + t);
            return;
        }
        if (answered.compareAndSet(false, true)) reply(id, value);
    }

    static void timedOut(long id, AtomicBoolean answered) {
        if (!answered.compareAndSet(false, true)) return;
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", id);
        m.put("error", errorFields("_TIMED_OUT", "the call did not return within the request's timeout",
                true, false, false));
        emit(m);
    }

    static void reply(long id, Object value) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", id);
        m.put("ok", value);
        emit(m);
    }

    static void replyError(long id, Throwable t, String op) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", id);
        m.put("error", error(t, false, TXN_OPS.contains(op)));
        emit(m);
    }

    static void emit(Map<String, Object> m) {
        write(m, true);
    }

    /** A line nobody waits on at once (a batch's reply): flushed within FLUSH_MS by the flusher, or with the next
     *  emit, so a stream of sends costs no write per record. */
    static void emitLater(Map<String, Object> m) {
        write(m, false);
    }

    static final long FLUSH_MS = 2;

    static void write(Map<String, Object> m, boolean now) {
        byte[] line = (Json.write(m) + "\n").getBytes(StandardCharsets.UTF_8);
        synchronized (OUT_LOCK) {
            try {
                writeReports();
                OUT.write(line);
                if (now) OUT.flush();
                unflushed = !now;
            } catch (java.io.IOException e) {
                System.exit(0);  // stdout closed: the harness went away
            }
        }
    }

    /**
     * One record's outcome, `[tag, offset]` or `[tag, null, ERROR]`, written within FLUSH_MS with its handle's
     * others. Called by the client's I/O thread for every record, so it only appends the report's text.
     */
    static void report(Handle h, Object tag, org.apache.kafka.clients.producer.RecordMetadata md, Throwable e) {
        String error = e == null ? null : Json.write(error(e, true, false));
        synchronized (h.reports) {
            StringBuilder b = h.reports;
            if (b.length() == 0) REPORTING.add(h);
            else b.append(',');
            b.append('[');
            if (tag instanceof Long) b.append((long) (Long) tag);
            else Json.write(b, tag);
            if (error == null) b.append(',').append(md.offset()).append(']');
            else b.append(",null,").append(error).append(']');
        }
        h.delivered();  // after the report is queued: a flush that sees nothing pending writes it before its reply
    }

    /** The queued reports as `deliveries` lines (the caller holds OUT_LOCK and flushes). */
    static void writeReports() throws java.io.IOException {
        Handle h;
        while ((h = REPORTING.poll()) != null) {
            String reports;
            synchronized (h.reports) {
                reports = h.reports.toString();
                h.reports.setLength(0);
            }
            if (reports.isEmpty()) continue;
            StringBuilder b = new StringBuilder(reports.length() + h.name.length() + 48);
            b.append("{\"event\":\"deliveries\",\"handle\":");
            Json.quote(b, h.name);
            b.append(",\"reports\":[").append(reports).append("]}\n");
            OUT.write(b.toString().getBytes(StandardCharsets.ISO_8859_1));  // ASCII: quote() escapes the rest
            unflushed = true;
        }
    }

    static void flushPending() {
        synchronized (OUT_LOCK) {
            try {
                writeReports();
                if (!unflushed) return;
                OUT.flush();
                unflushed = false;
            } catch (java.io.IOException e) {
                System.exit(0);
            }
        }
    }

    // --- errors --------------------------------------------------------------------------------------------------

    /** Java exception class (simple name, walked up the class tree) -> librdkafka's error name. */
    static final Map<String, String> NAMES = new HashMap<>();
    /** Kafka protocol error names whose librdkafka name differs (the rest are spelled the same). */
    static final Map<String, String> RENAMED = new HashMap<>();
    /** The Java client's fatal errors: the producer is unusable after them (TransactionManager's fatalError:
     *  an EndTxn, AddPartitionsToTxn or TxnOffsetCommit answered INVALID_TXN_STATE is one). */
    static final Set<String> FATAL = Set.of("ProducerFencedException", "FencedInstanceIdException",
            "OutOfOrderSequenceException", "AuthorizationException", "UnsupportedVersionException",
            "InvalidTxnStateException");

    static {
        NAMES.put("NotEnoughReplicasException", "NOT_ENOUGH_REPLICAS");
        NAMES.put("NotEnoughReplicasAfterAppendException", "NOT_ENOUGH_REPLICAS_AFTER_APPEND");
        NAMES.put("ProducerFencedException", "PRODUCER_FENCED");
        NAMES.put("InvalidProducerEpochException", "INVALID_PRODUCER_EPOCH");
        NAMES.put("OutOfOrderSequenceException", "OUT_OF_ORDER_SEQUENCE_NUMBER");
        NAMES.put("NotLeaderOrFollowerException", "NOT_LEADER_FOR_PARTITION");
        NAMES.put("NotLeaderForPartitionException", "NOT_LEADER_FOR_PARTITION");
        NAMES.put("RecordTooLargeException", "MSG_SIZE_TOO_LARGE");
        NAMES.put("UnknownTopicOrPartitionException", "UNKNOWN_TOPIC_OR_PART");
        NAMES.put("InvalidRecordException", "INVALID_RECORD");
        NAMES.put("IllegalStateException", "_STATE");
        NAMES.put("UnknownProducerIdException", "UNKNOWN_PRODUCER_ID");
        NAMES.put("ConcurrentTransactionsException", "CONCURRENT_TRANSACTIONS");
        NAMES.put("FencedInstanceIdException", "FENCED_INSTANCE_ID");
        NAMES.put("NetworkException", "_TRANSPORT");
        NAMES.put("DisconnectException", "_TRANSPORT");
        NAMES.put("TransactionAbortedException", "_PURGE_QUEUE");  // librdkafka purges an aborted txn's queue
        NAMES.put("ConfigException", "_INVALID_ARG");
        NAMES.put("IllegalArgumentException", "_INVALID_ARG");
        NAMES.put("InterruptException", "_INTR");
        RENAMED.put("UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_OR_PART");
        RENAMED.put("NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_FOR_PARTITION");
        RENAMED.put("MESSAGE_TOO_LARGE", "MSG_SIZE_TOO_LARGE");
        RENAMED.put("CORRUPT_MESSAGE", "INVALID_MSG");
        RENAMED.put("INVALID_TOPIC_EXCEPTION", "TOPIC_EXCEPTION");
        RENAMED.put("INVALID_FETCH_SIZE", "INVALID_MSG_SIZE");
        RENAMED.put("STALE_CONTROLLER_EPOCH", "STALE_CTRL_EPOCH");
        RENAMED.put("UNKNOWN_SERVER_ERROR", "_FAIL");  // Errors' answer for an exception it does not know
        RENAMED.put("NONE", "_FAIL");
    }

    static boolean inTree(Throwable t, Set<String> names) {
        for (Class<?> c = t.getClass(); c != null; c = c.getSuperclass()) {
            if (names.contains(c.getSimpleName())) return true;
        }
        return false;
    }

    /** The exception that says what went wrong: futures and the client's generic KafkaException wrap it. */
    static Throwable cause(Throwable t) {
        while (t.getCause() != null && (t instanceof ExecutionException
                || t instanceof java.util.concurrent.CompletionException
                || t.getClass() == KafkaException.class)) {
            t = t.getCause();
        }
        return t;
    }

    static String name(Throwable t, boolean send) {
        for (Class<?> c = t.getClass(); c != null; c = c.getSuperclass()) {
            String simple = c.getSimpleName();
            if (simple.equals("TimeoutException") && c.getName().startsWith("org.apache.kafka")) {
                return send ? "_MSG_TIMED_OUT" : "_TIMED_OUT";
            }
            String mapped = NAMES.get(simple);
            if (mapped != null) return mapped;
        }
        if (t instanceof org.apache.kafka.common.errors.ApiException) {
            String protocol = Errors.forException(t).name();
            return RENAMED.getOrDefault(protocol, protocol);
        }
        return "_FAIL";
    }

    static Map<String, Object> error(Throwable thrown, boolean send, boolean txnCall) {
        Throwable t = cause(thrown);
        if (t instanceof WorkerError) {
            WorkerError w = (WorkerError) t;
            return errorFields(w.name, w.getMessage(), w.retriable, false, false);
        }
        boolean fatal = inTree(t, FATAL);
        boolean abortable = txnCall && !fatal && t instanceof KafkaException;
        String message = thrown == t ? t.toString() : thrown + " (caused by " + t + ")";
        return errorFields(name(t, send), message, t instanceof RetriableException, fatal, abortable);
    }

    static Map<String, Object> errorFields(String name, String message, boolean retriable, boolean fatal,
                                           boolean abortable) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("name", name);
        e.put("message", message);
        e.put("retriable", retriable);
        e.put("fatal", fatal);
        e.put("abortable", abortable);
        return e;
    }

    // --- clients -------------------------------------------------------------------------------------------------

    static Object create(Map<String, Object> req) {
        String name = (String) req.get("handle");
        String kind = (String) req.get("kind");
        if (HANDLES.containsKey(name)) throw new WorkerError("_INVALID_ARG", "handle " + name + " exists", false);
        Properties props = new Properties();
        for (Map.Entry<String, Object> e : Json.object(req.get("config")).entrySet()) {
            props.put(e.getKey(), String.valueOf(e.getValue()));
        }
        Handle h = new Handle(name);
        if ("producer".equals(kind)) {
            h.producer = new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
        } else if ("consumer".equals(kind)) {
            h.consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        } else {
            throw new WorkerError("_INVALID_ARG", "unknown client kind " + kind, false);
        }
        HANDLES.put(name, h);
        return null;
    }

    static Handle handle(Map<String, Object> req, String field) {
        Handle h = HANDLES.get((String) req.get(field));
        if (h == null) throw new WorkerError("_INVALID_ARG", "no client with handle " + req.get(field), false);
        return h;
    }

    static KafkaProducer<byte[], byte[]> producer(Handle h) {
        if (h.producer == null) throw new WorkerError("_INVALID_ARG", h.name + " is not a producer", false);
        return h.producer;
    }

    static KafkaConsumer<byte[], byte[]> consumer(Handle h) {
        if (h.consumer == null) throw new WorkerError("_INVALID_ARG", h.name + " is not a consumer", false);
        return h.consumer;
    }

    static double seconds(Map<String, Object> req, String field, double dflt) {
        Object v = req.get(field);
        return v == null ? dflt : ((Number) v).doubleValue();
    }

    static Duration duration(double seconds) {
        return Duration.ofMillis(Math.max(0, (long) (seconds * 1000)));
    }

    // --- producer ------------------------------------------------------------------------------------------------

    /** One record of a `produce_batch`, as send() takes it (partition null: the partitioner chooses). */
    record BatchRecord(String topic, Integer partition, byte[] value, long tag) {
        /** A record parsed as plain JSON values (a request whose `op` did not come before its `records`). */
        static BatchRecord of(List<?> r) {
            int partition = ((Number) r.get(1)).intValue();
            byte[] value = r.get(2) == null ? null : ((String) r.get(2)).getBytes(StandardCharsets.ISO_8859_1);
            return new BatchRecord((String) r.get(0), partition < 0 ? null : partition, value,
                    ((Number) r.get(3)).longValue());
        }
    }

    /** A delivery outcome held back while send() has not returned, so the produce reply always comes first. */
    static final class Delivery {
        boolean sendReturned;
        boolean held;
        org.apache.kafka.clients.producer.RecordMetadata md;
        Exception error;
    }

    static void produce(long id, Handle h, Map<String, Object> req) {
        Object tag = req.get("tag");
        int partition = ((Number) req.get("partition")).intValue();
        byte[] value = req.get("value") == null ? null : ((String) req.get("value")).getBytes(StandardCharsets.ISO_8859_1);
        ProducerRecord<byte[], byte[]> record = new ProducerRecord<>((String) req.get("topic"),
                partition < 0 ? null : partition, null, value);  // librdkafka's -1: the partitioner chooses
        Delivery d = new Delivery();
        try {
            producer(h).send(record, (md, e) -> {
                synchronized (d) {
                    if (!d.sendReturned) {
                        d.held = true;
                        d.md = md;
                        d.error = e;
                        return;
                    }
                }
                report(h, tag, md, e);
            });
        } catch (Throwable t) {
            synchronized (d) {
                d.sendReturned = true;
                if (!d.held) {
                    h.delivered();  // no outcome will follow: nothing is pending any more
                    replyError(id, t, "produce");
                    return;
                }
            }
        }
        boolean held;
        synchronized (d) {
            d.sendReturned = true;
            held = d.held;
        }
        reply(id, null);
        if (held) report(h, tag, d.md, d.error);
    }

    /**
     * A plain producer's batch: each record sent in order. A record send() refuses is reported as its failed
     * delivery, since nobody waits on this request to raise it; send() itself blocks while the client's buffer
     * is full (up to max.block.ms), so a full queue is waited out here as the harness's produce() would retry.
     */
    static void produceBatch(long id, Handle h, List<?> records) {
        KafkaProducer<byte[], byte[]> p;
        try {
            p = producer(h);
        } catch (RuntimeException e) {
            synchronized (h) {
                h.pending -= records.size();
                h.notifyAll();
            }
            replyError(id, e, "produce_batch");
            return;
        }
        for (Object o : records) {
            long tag = o instanceof BatchRecord b ? b.tag() : ((Number) ((List<?>) o).get(3)).longValue();
            try {
                BatchRecord r = o instanceof BatchRecord b ? b : BatchRecord.of((List<?>) o);
                p.send(new ProducerRecord<>(r.topic(), r.partition(), null, r.value()),
                        (md, e) -> report(h, tag, md, e));
            } catch (Throwable t) {
                report(h, tag, null, t);
            }
        }
        Map<String, Object> ok = new LinkedHashMap<>();
        ok.put("id", id);
        ok.put("ok", null);
        emitLater(ok);
    }

    /** Deliveries are emitted as they happen; like librdkafka's poll this returns at the first outcome after
     *  `seen` (the count when the request came) or at the timeout. */
    static Object poll(Handle h, double timeout, long seen) throws InterruptedException {
        long deadline = System.nanoTime() + duration(timeout).toNanos();
        synchronized (h) {
            h.polling++;
            try {
                while (h.deliveries == seen) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) break;
                    TimeUnit.NANOSECONDS.timedWait(h, left);
                }
            } finally {
                h.polling--;
            }
        }
        return null;
    }

    static Object flush(Handle h, double timeout) throws InterruptedException {
        KafkaProducer<byte[], byte[]> p = producer(h);
        // flush() has no timeout: it runs on its own thread (it makes lingering batches ready at once) while
        // this one waits for the outcomes up to the request's timeout. flush(0) only counts, as librdkafka's does
        if (timeout > 0 && h.flushing.compareAndSet(false, true)) {
            Thread flusher = new Thread(() -> {
                try {
                    p.flush();
                } catch (RuntimeException e) {
                    System.err.println("kafka-chaos worker: flush of " + h.name + ": " + e);
                } finally {
                    h.flushing.set(false);
                }
            }, "kc-flush-" + h.name);
            flusher.setDaemon(true);
            flusher.start();
        }
        long deadline = System.nanoTime() + duration(timeout).toNanos();
        synchronized (h) {
            while (h.pending > 0) {
                long left = deadline - System.nanoTime();
                if (left <= 0) break;
                TimeUnit.NANOSECONDS.timedWait(h, left);
            }
            return h.pending;
        }
    }

    static Object sendOffsets(Handle h, Map<String, Object> req) throws Exception {
        Handle c = handle(req, "consumer");
        // the consumer is single-threaded: its group metadata is read on its own thread
        ConsumerGroupMetadata group = c.exec.submit(() -> consumer(c).groupMetadata()).get();
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        for (Object o : (List<?>) req.get("offsets")) {
            List<?> tpo = (List<?>) o;
            long offset = ((Number) tpo.get(2)).longValue();
            // librdkafka leaves out the partitions without a position (a logical offset < 0: nothing consumed
            // yet) and, when none is left, sends nothing and succeeds (rd_kafka_send_offsets_to_transaction,
            // rd_kafka_topic_partition_match_valid_offset); OffsetAndMetadata refuses a negative offset
            if (offset >= 0) {
                offsets.put(new TopicPartition((String) tpo.get(0), ((Number) tpo.get(1)).intValue()),
                        new OffsetAndMetadata(offset));
            }
        }
        if (offsets.isEmpty()) return null;
        producer(h).sendOffsetsToTransaction(offsets, group);
        return null;
    }

    /**
     * Which transaction protocol the producer speaks, to the client log: the Java client from 4.0 speaks version 2
     * (KIP-890) when the brokers' finalized transaction.version feature allows. Read by reflection because no
     * public API says it and older clients have no such method.
     */
    static void logTransactionVersion(Handle h) {
        try {
            java.lang.reflect.Field f = KafkaProducer.class.getDeclaredField("transactionManager");
            f.setAccessible(true);
            Object tm = f.get(h.producer);
            if (tm == null) return;
            Object v2 = tm.getClass().getMethod("isTransactionV2Enabled").invoke(tm);
            int version = Boolean.TRUE.equals(v2) ? 2 : 1;
            if (version != h.txnVersion) {
                h.txnVersion = version;
                System.err.println("kafka-chaos worker: " + h.name + " speaks transaction.version=" + version);
            }
        } catch (ReflectiveOperationException | RuntimeException e) {
            if (h.txnVersion == 0) {
                h.txnVersion = 1;
                System.err.println("kafka-chaos worker: " + h.name + " speaks transaction.version=1 (no v2 in it)");
            }
        }
    }

    // --- consumer ------------------------------------------------------------------------------------------------

    static Object assign(Handle h, Map<String, Object> req) {
        KafkaConsumer<byte[], byte[]> c = consumer(h);
        List<TopicPartition> tps = new ArrayList<>();
        Map<TopicPartition, Long> offsets = new LinkedHashMap<>();
        for (Object o : (List<?>) req.get("partitions")) {
            List<?> tpo = (List<?>) o;
            TopicPartition tp = new TopicPartition((String) tpo.get(0), ((Number) tpo.get(1)).intValue());
            tps.add(tp);
            if (tpo.size() > 2 && tpo.get(2) != null) offsets.put(tp, ((Number) tpo.get(2)).longValue());
        }
        c.assign(tps);
        for (Map.Entry<TopicPartition, Long> e : offsets.entrySet()) {
            long offset = e.getValue();
            if (offset == -2) c.seekToBeginning(List.of(e.getKey()));
            else if (offset == -1) c.seekToEnd(List.of(e.getKey()));
            else if (offset >= 0) c.seek(e.getKey(), offset);
            // other logical offsets (librdkafka's stored/invalid): the committed offset or auto.offset.reset
        }
        return null;
    }

    /**
     * Up to `max` records. Java's poll returns up to max.poll.records, a setting; the records beyond `max` are not
     * kept in a buffer here but left to the client: the consumer is sought back to the first one of each
     * partition, so its position, the offsets it auto-commits and a rebalance all see exactly what was returned
     * (a worker-side buffer would let auto-commit pass records the harness never saw).
     */
    static Object consume(Handle h, int max, double timeout) throws InterruptedException {
        KafkaConsumer<byte[], byte[]> c = consumer(h);
        if (c.assignment().isEmpty() && c.subscription().isEmpty()) {
            Thread.sleep(duration(timeout).toMillis());  // librdkafka returns nothing; Java would throw
            return List.of();
        }
        ConsumerRecords<byte[], byte[]> records = c.poll(duration(timeout));
        List<Object> out = new ArrayList<>();
        Map<TopicPartition, ConsumerRecord<byte[], byte[]>> firstLeft = new LinkedHashMap<>();
        for (ConsumerRecord<byte[], byte[]> r : records) {
            TopicPartition tp = new TopicPartition(r.topic(), r.partition());
            if (out.size() < max && !firstLeft.containsKey(tp)) {
                byte[] v = r.value();
                out.add(List.of(r.topic(), (long) r.partition(), r.offset(),
                        v == null ? "" : new String(v, StandardCharsets.ISO_8859_1)));
            } else {
                firstLeft.putIfAbsent(tp, r);
            }
        }
        for (Map.Entry<TopicPartition, ConsumerRecord<byte[], byte[]>> e : firstLeft.entrySet()) {
            ConsumerRecord<byte[], byte[]> r = e.getValue();
            c.seek(e.getKey(), new OffsetAndMetadata(r.offset(), r.leaderEpoch(), ""));
        }
        return out;
    }

    static Object position(Handle h, Map<String, Object> req) {
        KafkaConsumer<byte[], byte[]> c = consumer(h);
        Set<TopicPartition> assigned = new HashSet<>(c.assignment());
        List<Object> out = new ArrayList<>();
        for (Object o : (List<?>) req.get("partitions")) {
            List<?> tp0 = (List<?>) o;
            TopicPartition tp = new TopicPartition((String) tp0.get(0), ((Number) tp0.get(1)).intValue());
            long offset = OFFSET_INVALID;
            if (assigned.contains(tp)) {
                try {
                    // librdkafka answers from what it knows; Java would look the position up: do not wait for it
                    offset = c.position(tp, Duration.ZERO);
                } catch (org.apache.kafka.common.errors.TimeoutException e) {
                    offset = OFFSET_INVALID;
                }
            }
            out.add(List.of(tp.topic(), (long) tp.partition(), offset));
        }
        return out;
    }

    static Object watermarks(Handle h, Map<String, Object> req) {
        KafkaConsumer<byte[], byte[]> c = consumer(h);
        TopicPartition tp = new TopicPartition((String) req.get("topic"), ((Number) req.get("partition")).intValue());
        Duration timeout = duration(seconds(req, "timeout", 10));
        long low = c.beginningOffsets(List.of(tp), timeout).get(tp);
        long high = c.endOffsets(List.of(tp), timeout).get(tp);
        return List.of(low, high);
    }

    static Object close(Handle h) {
        // a producer's close waits for its outstanding sends, each bounded by delivery.timeout.ms
        if (h.producer != null) h.producer.close();
        if (h.consumer != null) h.consumer.close();
        HANDLES.remove(h.name);
        h.exec.shutdown();
        return null;
    }

    static List<String> strings(Object o) {
        List<String> out = new ArrayList<>();
        for (Object x : (List<?>) o) out.add((String) x);
        return out;
    }

    /**
     * The request lines of an input stream as byte ranges of one buffer (`buf[start, end)`, valid until the next
     * call): a line is parsed where it lies, with no character decoding and no copy of its own.
     */
    static final class Lines {
        final InputStream in;
        byte[] buf = new byte[1 << 16];
        int start;      // the current line
        int end;
        int next;       // where the next line begins
        int filled;     // bytes read into buf

        Lines(InputStream in) {
            this.in = in;
        }

        boolean next() throws java.io.IOException {
            int scan = next;
            while (true) {
                for (int k = scan; k < filled; k++) {
                    if (buf[k] == '\n') {
                        start = next;
                        end = k > start && buf[k - 1] == '\r' ? k - 1 : k;
                        next = k + 1;
                        return true;
                    }
                }
                scan = filled - next;
                if (next > 0) {  // keep the unfinished line only
                    System.arraycopy(buf, next, buf, 0, filled - next);
                    filled -= next;
                    next = 0;
                }
                if (filled == buf.length) buf = java.util.Arrays.copyOf(buf, buf.length * 2);
                int n = in.read(buf, filled, buf.length - filled);
                if (n < 0) {
                    if (filled == next) return false;
                    start = next;  // a last line without its newline
                    end = filled;
                    next = filled;
                    return true;
                }
                filled += n;
            }
        }

        String text() {
            return new String(buf, start, end - start, StandardCharsets.UTF_8);
        }
    }

    // --- JSON ----------------------------------------------------------------------------------------------------

    /**
     * Just enough JSON: objects, arrays, strings, numbers (Long or Double), booleans, null. Read from UTF-8 bytes:
     * a string of ASCII without escapes (every payload the harness sends as latin-1 text, mostly) is one copy.
     */
    static final class Json {
        final byte[] s;
        int i;
        final int end;

        Json(byte[] s, int start, int end) {
            this.s = s;
            this.i = start;
            this.end = end;
        }

        static Object parse(String text) {
            byte[] b = text.getBytes(StandardCharsets.UTF_8);
            return parse(b, 0, b.length);
        }

        static Object parse(byte[] b, int start, int end) {
            Json p = new Json(b, start, end);
            Object v = p.value();
            p.ws();
            if (p.i != p.end) throw p.fail("trailing text");
            return v;
        }

        static boolean blank(byte[] b, int start, int end) {
            Json p = new Json(b, start, end);
            p.ws();
            return p.i == end;
        }

        @SuppressWarnings("unchecked")
        static Map<String, Object> object(Object o) {
            if (!(o instanceof Map)) throw new IllegalArgumentException("not a JSON object");
            return (Map<String, Object>) o;
        }

        IllegalArgumentException fail(String why) {
            return new IllegalArgumentException("bad JSON at " + i + ": " + why);
        }

        void ws() {
            while (i < end && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
        }

        byte peek() {
            if (i >= end) throw fail("end of text");
            return s[i];
        }

        Object value() {
            ws();
            byte ch = peek();
            if (ch == '{') {
                i++;
                Map<String, Object> m = new LinkedHashMap<>();
                ws();
                if (peek() == '}') {
                    i++;
                    return m;
                }
                while (true) {
                    ws();
                    String k = string();
                    ws();
                    expect(':');
                    // a batch's records straight into what send() takes (the harness writes `op` first): no
                    // list, string and boxed number per field of every record, and no second copy of its value
                    int at = i;
                    Object v;
                    if ("records".equals(k) && "produce_batch".equals(m.get("op"))) {
                        try {
                            v = records();
                        } catch (IllegalArgumentException e) {  // not records as the harness writes them: plain
                            i = at;                               // values, each failing as its own delivery
                            v = value();
                        }
                    } else {
                        v = value();
                    }
                    m.put(k, v);
                    ws();
                    if (peek() == ',') i++;
                    else {
                        expect('}');
                        return m;
                    }
                }
            }
            if (ch == '[') {
                i++;
                List<Object> l = new ArrayList<>();
                ws();
                if (peek() == ']') {
                    i++;
                    return l;
                }
                while (true) {
                    l.add(value());
                    ws();
                    if (peek() == ',') i++;
                    else {
                        expect(']');
                        return l;
                    }
                }
            }
            if (ch == '"') return string();
            if (word("true")) return Boolean.TRUE;
            if (word("false")) return Boolean.FALSE;
            if (word("null")) return null;
            return number();
        }

        /** `[[topic, partition, value, tag], ...]` as BatchRecords; a topic spelled as the previous record's is the
         *  same String. */
        List<BatchRecord> records() {
            List<BatchRecord> out = new ArrayList<>();
            ws();
            expect('[');
            ws();
            if (peek() == ']') {
                i++;
                return out;
            }
            String topic = null;
            int topicStart = 0;
            int topicStop = -1;  // the previous topic's bytes in `s` (stop < start: none to compare with)
            while (true) {
                ws();
                expect('[');
                ws();
                String recordTopic = null;  // none: send() refuses the record, reported as its failed delivery
                if (!word("null")) {
                    int start = i + 1;
                    boolean plain = scan();
                    int stop = i - 1;
                    if (!plain || topic == null || topicStop < 0
                            || !java.util.Arrays.equals(s, start, stop, s, topicStart, topicStop)) {
                        topic = text(start, stop, plain);
                        topicStart = start;
                        topicStop = plain ? stop : -1;
                    }
                    recordTopic = topic;
                }
                comma();
                long partition = integer();
                comma();
                byte[] value = word("null") ? null : bytes();
                comma();
                long tag = integer();
                ws();
                expect(']');
                out.add(new BatchRecord(recordTopic, partition < 0 ? null : (int) partition, value, tag));
                ws();
                if (peek() == ',') i++;
                else {
                    expect(']');
                    return out;
                }
            }
        }

        void comma() {
            ws();
            expect(',');
            ws();
        }

        /** A JSON integer read in place (no String per number). */
        long integer() {
            boolean negative = i < end && s[i] == '-';
            if (negative) i++;
            int start = i;
            long v = 0;
            while (i < end && s[i] >= '0' && s[i] <= '9') v = v * 10 + (s[i++] - '0');
            if (i == start || i - start > 18 || (i < end && (s[i] == '.' || s[i] == 'e' || s[i] == 'E'))) {
                throw fail("expected an integer");
            }
            return negative ? -v : v;
        }

        /** A string of latin-1 text (a payload) as its bytes: ASCII without escapes is one copy. */
        byte[] bytes() {
            int start = i + 1;
            boolean plain = scan();
            int stop = i - 1;
            if (plain) return java.util.Arrays.copyOfRange(s, start, stop);
            return text(start, stop, false).getBytes(StandardCharsets.ISO_8859_1);
        }

        boolean word(String w) {
            if (end - i < w.length()) return false;
            for (int k = 0; k < w.length(); k++) {
                if (s[i + k] != w.charAt(k)) return false;
            }
            i += w.length();
            return true;
        }

        Object number() {
            int start = i;
            boolean integral = true;
            while (i < end) {
                byte c = s[i];
                if (c == '.' || c == 'e' || c == 'E') integral = false;
                else if (c != '-' && c != '+' && (c < '0' || c > '9')) break;
                i++;
            }
            if (i == start) throw fail("unexpected " + (char) s[i]);
            String num = new String(s, start, i - start, StandardCharsets.ISO_8859_1);
            return integral ? (Object) Long.parseLong(num) : (Object) Double.parseDouble(num);
        }

        void expect(char c) {
            if (i >= end || s[i] != c) throw fail("expected " + c);
            i++;
        }

        String string() {
            int start = i + 1;
            boolean plain = scan();
            return text(start, i - 1, plain);
        }

        /** Moves past a string (i after its closing quote); true when it is ASCII without escapes. */
        boolean scan() {
            expect('"');
            boolean plain = true;  // ASCII without escapes: its bytes are its characters
            while (true) {
                if (i >= end) throw fail("unterminated string");
                byte ch = s[i];
                if (ch == '"') break;
                if (ch == '\\') {
                    plain = false;
                    i++;  // the escaped character: not the end even if it is a quote
                } else if (ch < 0) {
                    plain = false;  // a UTF-8 sequence (its bytes are never a quote or a backslash)
                }
                i++;
            }
            i++;
            return plain;
        }

        String text(int start, int stop, boolean plain) {
            if (plain) return new String(s, start, stop - start, StandardCharsets.ISO_8859_1);
            return unescape(new String(s, start, stop - start, StandardCharsets.UTF_8));
        }

        String unescape(String raw) {
            StringBuilder b = new StringBuilder(raw.length());
            for (int k = 0; k < raw.length(); k++) {
                char ch = raw.charAt(k);
                if (ch != '\\') {
                    b.append(ch);
                    continue;
                }
                if (++k >= raw.length()) throw fail("a string ends in a backslash");
                char esc = raw.charAt(k);
                switch (esc) {
                    case 'n': b.append('\n'); break;
                    case 't': b.append('\t'); break;
                    case 'r': b.append('\r'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'u':
                        if (k + 5 > raw.length()) throw fail("a short \\u escape");
                        b.append((char) Integer.parseInt(raw.substring(k + 1, k + 5), 16));
                        k += 4;
                        break;
                    default: b.append(esc);  // \" \\ \/
                }
            }
            return b.toString();
        }

        static String write(Object o) {
            StringBuilder b = new StringBuilder();
            write(b, o);
            return b.toString();
        }

        static void write(StringBuilder b, Object o) {
            if (o == null) {
                b.append("null");
            } else if (o instanceof String) {
                quote(b, (String) o);
            } else if (o instanceof Long) {
                b.append(((Long) o).longValue());  // append(Object) would make a String of it first
            } else if (o instanceof Boolean || o instanceof Integer) {
                b.append(o);
            } else if (o instanceof Number) {
                double d = ((Number) o).doubleValue();
                b.append(Double.isFinite(d) ? String.valueOf(d) : "null");
            } else if (o instanceof Map) {
                b.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                    if (!first) b.append(',');
                    first = false;
                    quote(b, String.valueOf(e.getKey()));
                    b.append(':');
                    write(b, e.getValue());
                }
                b.append('}');
            } else if (o instanceof Iterable) {
                b.append('[');
                boolean first = true;
                for (Object x : (Iterable<?>) o) {
                    if (!first) b.append(',');
                    first = false;
                    write(b, x);
                }
                b.append(']');
            } else {
                quote(b, o.toString());
            }
        }

        /** ASCII only (everything else as \\u escapes): the line reads the same whatever the reader's charset. */
        static void quote(StringBuilder b, String s) {
            b.append('"');
            for (int k = 0; k < s.length(); k++) {
                char ch = s.charAt(k);
                if (ch == '"' || ch == '\\') b.append('\\').append(ch);
                else if (ch == '\n') b.append("\\n");
                else if (ch < 0x20 || ch > 0x7e) b.append(String.format("\\u%04x", (int) ch));
                else b.append(ch);
            }
            b.append('"');
        }
    }

    private KafkaChaosWorker() {
    }
}
