package dev.sluice.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;

import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple4;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.legacy.RichSinkFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.functions.source.legacy.RichParallelSourceFunction;
import org.apache.flink.util.Collector;

/**
 * Apache Flink versions of sluice's bundled example jobs, run in a local MiniCluster, for the
 * side-by-side comparison of {@code sluice-bench flink}.
 *
 * <pre>
 * java -cp JAR:CLASSPATH dev.sluice.bench.FlinkJobs stream-sum --records N [--keys K]
 *     [--parallelism P] [--rocksdb --checkpoint-dir DIR [--checkpoint-interval-ms MS]]
 *     [--mode STREAMING|BATCH] [--tmp-dir DIR]
 * java -cp JAR:CLASSPATH dev.sluice.bench.FlinkJobs wordcount --input PATH [--parallelism P]
 *     [--mode BATCH|STREAMING] [--tmp-dir DIR]
 * java -cp JAR:CLASSPATH dev.sluice.bench.FlinkJobs latency --output DIR [--rate R] [--records N]
 *     [--keys K] [--warmup-ms W] [--buffer-timeout-ms T] [--parallelism P]
 * java -cp JAR:CLASSPATH dev.sluice.bench.FlinkJobs shuffle --records N [--keys K] [--parallelism P]
 * </pre>
 *
 * <p>With {@code --remote HOST:PORT} the job goes to a running cluster's REST endpoint (a
 * standalone session cluster whose processes have this jar on their classpath) instead of a
 * MiniCluster, and the job id is printed as {@code JOBID <id>} when it has finished.
 *
 * <p>Every setting that differs from Flink's defaults is set here, in {@link #configuration}, and
 * listed in bench/README.md with the reason.
 */
public final class FlinkJobs {
    private FlinkJobs() {}

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            throw new IllegalArgumentException("usage: FlinkJobs stream-sum|wordcount [--option value]...");
        }
        Map<String, String> params = parse(args);
        int parallelism = Integer.parseInt(params.getOrDefault("parallelism", "2"));
        StreamExecutionEnvironment env;
        String remote = params.get("remote");
        if (remote == null) {
            env = StreamExecutionEnvironment.createLocalEnvironment(parallelism, configuration(params));
        } else {
            int colon = remote.lastIndexOf(':');
            if (colon < 0) {
                throw new IllegalArgumentException("--remote needs HOST:PORT, got " + remote);
            }
            // No jar to ship: the cluster's processes have this one on their classpath.
            env = StreamExecutionEnvironment.createRemoteEnvironment(
                    remote.substring(0, colon),
                    Integer.parseInt(remote.substring(colon + 1)),
                    configuration(params));
            env.setParallelism(parallelism);
        }
        JobExecutionResult result = switch (args[0]) {
            case "stream-sum" -> streamSum(env, params);
            case "wordcount" -> wordCount(env, params);
            case "latency" -> latency(env, params);
            case "shuffle" -> shuffle(env, params);
            default -> throw new IllegalArgumentException("unknown job " + args[0]);
        };
        System.out.println("JOBID " + result.getJobID());
    }

    /** The execution mode {@code --mode} names, else {@code fallback}. */
    private static RuntimeExecutionMode mode(Map<String, String> params, String fallback) {
        return RuntimeExecutionMode.valueOf(params.getOrDefault("mode", fallback).toUpperCase());
    }

    /** {@code --name value} pairs after the job name; a flag without a value maps to "true". */
    private static Map<String, String> parse(String[] args) {
        Map<String, String> params = new HashMap<>();
        for (int i = 1; i < args.length; i++) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --option, got " + args[i]);
            }
            String name = args[i].substring(2);
            if (i + 1 < args.length && !args[i + 1].startsWith("--")) {
                params.put(name, args[++i]);
            } else {
                params.put(name, "true");
            }
        }
        return params;
    }

    /** Flink's defaults, except what a user tuning for throughput would change. */
    static Configuration configuration(Map<String, String> params) {
        Map<String, String> conf = new HashMap<>();
        // Operators chained in one task hand records over without copying them: sluice's
        // chained operators pass records by value, never copied either.
        conf.put("pipeline.object-reuse", "true");
        if (params.containsKey("tmp-dir")) {
            // Where a BATCH job's blocking partitions spill (the harness measures their size).
            conf.put("io.tmp.dirs", params.get("tmp-dir"));
        }
        if (params.containsKey("buffer-timeout-ms")) {
            // 0 flushes after every record; the default is 100 ms.
            conf.put("execution.buffer-timeout.interval", params.get("buffer-timeout-ms") + " ms");
        }
        if (params.containsKey("rocksdb")) {
            String dir = params.get("checkpoint-dir");
            if (dir == null) {
                throw new IllegalArgumentException("--rocksdb needs --checkpoint-dir DIR");
            }
            conf.put("state.backend.type", "rocksdb");
            conf.put("execution.checkpointing.incremental", "true");
            conf.put("execution.checkpointing.interval",
                    params.getOrDefault("checkpoint-interval-ms", "1000") + " ms");
            conf.put("execution.checkpointing.dir", new java.io.File(dir).toURI().toString());
        }
        return Configuration.fromMap(conf);
    }

    /**
     * sluice's {@code stream-sum --rate 0 --keys K --records N}: the sequence 0..N split over the
     * sources, each i mapped to (i % K, 1), keyed by the first field, a running sum per key
     * emitted on every record, discarded.
     */
    static JobExecutionResult streamSum(StreamExecutionEnvironment env, Map<String, String> params) throws Exception {
        long records = Long.parseLong(required(params, "records"));
        long keys = Long.parseLong(params.getOrDefault("keys", "1000"));
        env.setRuntimeMode(mode(params, "STREAMING"));
        env.fromSequence(0, records - 1)
                .name("Generator Source")
                .map(new ToPair(keys))
                .keyBy(new First())
                .reduce(new Sum())
                .name("Keyed Sum")
                .sinkTo(new DiscardingSink<>());
        return env.execute("StreamSum (" + keys + " keys)");
    }

    /**
     * sluice's {@code wordcount --input PATH --discard}, in BATCH mode unless {@code --mode} says
     * otherwise: lines of a text file, lower-cased words split on non-word characters, counted
     * per word; the counts (final ones in BATCH mode, every update in STREAMING mode) are
     * formatted as "word count" and discarded (the harness checks nothing of them).
     */
    static JobExecutionResult wordCount(StreamExecutionEnvironment env, Map<String, String> params) throws Exception {
        env.setRuntimeMode(mode(params, "BATCH"));
        FileSource<String> source = FileSource
                .forRecordStreamFormat(new TextLineInputFormat(), new Path(required(params, "input")))
                .build();
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "Text Source")
                .flatMap(new Tokenizer())
                .name("Tokenizer")
                .keyBy(new Word())
                .sum(1)
                .map(new Format())
                .name("Format")
                .sinkTo(new DiscardingSink<>());
        return env.execute("WordCount");
    }

    /**
     * sluice's {@code latency --rate R --records N --keys K --warmup-ms W --output DIR}: a paced
     * source stamps each record with the wall-clock time it emits it, keyBy, a running sum per
     * key that carries the newest stamp, and a sink that counts {@code now - stamp} in a
     * histogram (the same buckets as sluice's {@code LatencyHistogram}) and writes it to
     * DIR/<subtask from 1>.json at the end. Records the first W ms of the schedule hold are not
     * counted.
     */
    static JobExecutionResult latency(StreamExecutionEnvironment env, Map<String, String> params) throws Exception {
        long rate = Long.parseLong(params.getOrDefault("rate", "10000"));
        if (rate < 1) {
            throw new IllegalArgumentException("--rate must be at least 1 record/s");
        }
        long records = Long.parseLong(params.getOrDefault("records", Long.toString(rate * 12)));
        long keys = Long.parseLong(params.getOrDefault("keys", "1000"));
        long warmupMs = Long.parseLong(params.getOrDefault("warmup-ms", "2000"));
        long warmup = (long) ((double) rate * warmupMs / 1000.0);
        String output = required(params, "output");
        env.addSource(new PacedSource(rate, records, keys), "Paced Source")
                .keyBy(new KeyOf4())
                .reduce(new Sum4())
                .name("Keyed Sum")
                .addSink(new LatencySink(output, warmup))
                .name("Latency Sink");
        return env.execute("Latency (rate " + rate + "/s, " + records + " records, " + keys + " keys)");
    }

    /**
     * sluice's {@code shuffle --records N --keys K}: N records of 100 bytes (a long key i % K and
     * a 92-byte payload of the byte i & 0xff) from the sequence 0..N split over the sources,
     * keyBy the key, a filter that reads the payload and keeps nothing, discarded.
     */
    static JobExecutionResult shuffle(StreamExecutionEnvironment env, Map<String, String> params) throws Exception {
        long records = Long.parseLong(required(params, "records"));
        long keys = Math.max(1, Long.parseLong(params.getOrDefault("keys", "1024")));
        env.fromSequence(0, records - 1)
                .name("Generator Source")
                .map(new ToRecord(keys))
                .keyBy(new KeyOfRecord())
                .filter(new Touch())
                .name("Count")
                .sinkTo(new DiscardingSink<>());
        return env.execute("Shuffle (" + records + " records of 100 bytes)");
    }

    /**
     * (i % K, 92 bytes of i & 0xff). With object reuse on, one tuple and one array are filled
     * for every record, as a user tuning for throughput would write it.
     */
    static final class ToRecord implements MapFunction<Long, Tuple2<Long, byte[]>> {
        private final long keys;
        private transient Tuple2<Long, byte[]> out;

        ToRecord(long keys) {
            this.keys = keys;
        }

        @Override
        public Tuple2<Long, byte[]> map(Long i) {
            if (out == null) {
                out = Tuple2.of(0L, new byte[92]);
            }
            out.f0 = i % keys;
            java.util.Arrays.fill(out.f1, (byte) (i & 0xff));
            return out;
        }
    }

    static final class KeyOfRecord implements KeySelector<Tuple2<Long, byte[]>, Long> {
        @Override
        public Long getKey(Tuple2<Long, byte[]> r) {
            return r.f0;
        }
    }

    /** Reads the payload's ends and the key, as sluice's sink does; keeps nothing. */
    static final class Touch implements FilterFunction<Tuple2<Long, byte[]>> {
        @Override
        public boolean filter(Tuple2<Long, byte[]> r) {
            return r.f1[0] == (byte) 0xff && r.f1[91] == (byte) 0xff && r.f0 == Long.MAX_VALUE;
        }
    }

    /** Nanoseconds since the Unix epoch: comparable between processes, unlike nanoTime. */
    static long epochNanos() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    /**
     * Subtask i of p emits the global indices i, i + p, ... below N at R / p records per second,
     * as sluice's generator does: the n-th record is due n / (R / p) seconds after the start; the
     * source sleeps until it is due, and emits at once what is overdue. Each record is (key,
     * emission time, index, 1).
     */
    static final class PacedSource extends RichParallelSourceFunction<Tuple4<Long, Long, Long, Long>> {
        private final long rate;
        private final long records;
        private final long keys;
        private volatile boolean running = true;

        PacedSource(long rate, long records, long keys) {
            this.rate = rate;
            this.records = records;
            this.keys = keys;
        }

        @Override
        public void run(SourceContext<Tuple4<Long, Long, Long, Long>> ctx) {
            int index = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            int parallelism = getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks();
            double nanosPerRecord = 1e9 * parallelism / rate;
            long start = System.nanoTime();
            long n = 0;
            for (long global = index; global < records && running; global += parallelism, n++) {
                long due = start + (long) (n * nanosPerRecord);
                for (long now = System.nanoTime(); now < due && running; now = System.nanoTime()) {
                    LockSupport.parkNanos(due - now);
                }
                synchronized (ctx.getCheckpointLock()) {
                    ctx.collect(Tuple4.of(global % keys, epochNanos(), global, 1L));
                }
            }
        }

        @Override
        public void cancel() {
            running = false;
        }
    }

    static final class KeyOf4 implements KeySelector<Tuple4<Long, Long, Long, Long>, Long> {
        @Override
        public Long getKey(Tuple4<Long, Long, Long, Long> r) {
            return r.f0;
        }
    }

    /** The newest record's stamp and index go on with the key's sum. */
    static final class Sum4 implements ReduceFunction<Tuple4<Long, Long, Long, Long>> {
        @Override
        public Tuple4<Long, Long, Long, Long> reduce(
                Tuple4<Long, Long, Long, Long> a, Tuple4<Long, Long, Long, Long> b) {
            return Tuple4.of(a.f0, b.f1, b.f2, a.f3 + b.f3);
        }
    }

    /** The latency histogram of one sink subtask, written as JSON when the input ends. */
    static final class LatencySink extends RichSinkFunction<Tuple4<Long, Long, Long, Long>> {
        /** sluice's LatencyHistogram: 7 significant bits. */
        private static final int SUB_BITS = 7;

        private final String output;
        private final long warmup;
        private transient long[] counts;
        private transient long total;
        private transient long skipped;
        private transient long min;
        private transient long max;
        private transient long firstStamp;
        private transient long lastStamp;

        LatencySink(String output, long warmup) {
            this.output = output;
            this.warmup = warmup;
        }

        @Override
        public void open(org.apache.flink.api.common.functions.OpenContext context) {
            counts = new long[(64 - SUB_BITS + 1) << SUB_BITS];
            min = Long.MAX_VALUE;
            firstStamp = Long.MAX_VALUE;
        }

        static int bucket(long v) {
            if (v < (1L << SUB_BITS)) {
                return (int) v;
            }
            int shift = 63 - Long.numberOfLeadingZeros(v) - SUB_BITS;
            return (shift << SUB_BITS) + (int) (v >>> shift);
        }

        @Override
        public void invoke(Tuple4<Long, Long, Long, Long> r, Context context) {
            long now = epochNanos();
            if (r.f2 < warmup) {
                skipped++;
                return;
            }
            long stamp = r.f1;
            long v = Math.max(0, now - stamp);
            counts[bucket(v)]++;
            total++;
            min = Math.min(min, v);
            max = Math.max(max, v);
            firstStamp = Math.min(firstStamp, stamp);
            lastStamp = Math.max(lastStamp, stamp);
        }

        @Override
        public void finish() throws IOException {
            int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask() + 1;
            StringBuilder json = new StringBuilder();
            json.append("{\"subtask\":").append(subtask)
                    .append(",\"skipped\":").append(skipped)
                    .append(",\"count\":").append(total)
                    .append(",\"min\":").append(total == 0 ? 0 : min)
                    .append(",\"max\":").append(max)
                    .append(",\"first_stamp\":").append(total == 0 ? 0 : firstStamp)
                    .append(",\"last_stamp\":").append(lastStamp)
                    .append(",\"buckets\":[");
            boolean first = true;
            for (int i = 0; i < counts.length; i++) {
                if (counts[i] > 0) {
                    json.append(first ? "" : ",").append('[').append(i).append(',').append(counts[i]).append(']');
                    first = false;
                }
            }
            json.append("]}\n");
            java.nio.file.Path dir = java.nio.file.Path.of(output);
            Files.createDirectories(dir);
            Files.writeString(dir.resolve(subtask + ".json"), json, StandardCharsets.UTF_8);
        }
    }

    private static String required(Map<String, String> params, String name) {
        String value = params.get(name);
        if (value == null) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return value;
    }

    static final class ToPair implements MapFunction<Long, Tuple2<Long, Long>> {
        private final long keys;

        ToPair(long keys) {
            this.keys = keys;
        }

        @Override
        public Tuple2<Long, Long> map(Long i) {
            return Tuple2.of(i % keys, 1L);
        }
    }

    static final class First implements KeySelector<Tuple2<Long, Long>, Long> {
        @Override
        public Long getKey(Tuple2<Long, Long> pair) {
            return pair.f0;
        }
    }

    static final class Sum implements ReduceFunction<Tuple2<Long, Long>> {
        @Override
        public Tuple2<Long, Long> reduce(Tuple2<Long, Long> a, Tuple2<Long, Long> b) {
            return Tuple2.of(a.f0, a.f1 + b.f1);
        }
    }

    /** Flink's WordCount tokenizer: lower case, split on {@code \W+}, empty words dropped. */
    static final class Tokenizer implements FlatMapFunction<String, Tuple2<String, Long>> {
        @Override
        public void flatMap(String line, Collector<Tuple2<String, Long>> out) {
            for (String word : line.toLowerCase().split("\\W+")) {
                if (!word.isEmpty()) {
                    out.collect(Tuple2.of(word, 1L));
                }
            }
        }
    }

    static final class Word implements KeySelector<Tuple2<String, Long>, String> {
        @Override
        public String getKey(Tuple2<String, Long> pair) {
            return pair.f0;
        }
    }

    static final class Format implements MapFunction<Tuple2<String, Long>, String> {
        @Override
        public String map(Tuple2<String, Long> pair) {
            return pair.f0 + " " + pair.f1;
        }
    }
}
