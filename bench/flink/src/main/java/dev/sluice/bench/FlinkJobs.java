package dev.sluice.bench;

import java.util.HashMap;
import java.util.Map;

import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

/**
 * Apache Flink versions of sluice's bundled example jobs, run in a local MiniCluster, for the
 * side-by-side comparison of {@code sluice-bench flink}.
 *
 * <pre>
 * java -cp JAR:CLASSPATH dev.sluice.bench.FlinkJobs stream-sum --records N [--keys K]
 *     [--parallelism P] [--rocksdb --checkpoint-dir DIR [--checkpoint-interval-ms MS]]
 * java -cp JAR:CLASSPATH dev.sluice.bench.FlinkJobs wordcount --input PATH [--parallelism P]
 * </pre>
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
        StreamExecutionEnvironment env =
                StreamExecutionEnvironment.createLocalEnvironment(parallelism, configuration(params));
        switch (args[0]) {
            case "stream-sum" -> streamSum(env, params);
            case "wordcount" -> wordCount(env, params);
            default -> throw new IllegalArgumentException("unknown job " + args[0]);
        }
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
    static void streamSum(StreamExecutionEnvironment env, Map<String, String> params) throws Exception {
        long records = Long.parseLong(required(params, "records"));
        long keys = Long.parseLong(params.getOrDefault("keys", "1000"));
        env.fromSequence(0, records - 1)
                .name("Generator Source")
                .map(new ToPair(keys))
                .keyBy(new First())
                .reduce(new Sum())
                .name("Keyed Sum")
                .sinkTo(new DiscardingSink<>());
        env.execute("StreamSum (" + keys + " keys)");
    }

    /**
     * sluice's {@code wordcount --input PATH --output ...} in BATCH mode: lines of a text file,
     * lower-cased words split on non-word characters, counted per word; the final counts are
     * formatted as "word count" and discarded (the harness checks nothing of them).
     */
    static void wordCount(StreamExecutionEnvironment env, Map<String, String> params) throws Exception {
        env.setRuntimeMode(RuntimeExecutionMode.BATCH);
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
        env.execute("WordCount");
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
