package sluice.yarn;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Map;
import java.util.TreeMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * Starts a MiniDFSCluster (one NameNode, three DataNodes, all on 127.0.0.1 with ports chosen
 * free) for sluice's tests. Writes a {@code core-site.xml} and an {@code hdfs-site.xml} into the
 * directory given as first argument, which clients then use as {@code HADOOP_CONF_DIR}, prints
 * one line {@code READY namenode=HOST:PORT nameservice=NAME} and runs until killed, or, with
 * {@code --watch-pid PID}, until that process is gone (a test binary that started it).
 *
 * <p>The written configuration names the NameNode twice: as {@code fs.defaultFS} and as the
 * only NameNode of a logical name service, so tests reach the same cluster through
 * {@code hdfs://HOST:PORT/}, {@code hdfs:///} and {@code hdfs://NAMESERVICE/} and exercise how
 * clients resolve each.
 *
 * <p>A test breaks the cluster through its {@code control} directory: it writes a file {@code
 * SEQ.cmd} (renamed into place, so never read half-written) holding one command, and the
 * launcher, which looks every 100 ms, runs the commands in the order of {@code SEQ} and answers
 * each with {@code SEQ.done} holding {@code ok} or {@code error: CAUSE}:
 *
 * <ul>
 *   <li>{@code stop-namenode}: the NameNode stops (its port refuses connections); the
 *       DataNodes keep running and keep trying to reach it.
 *   <li>{@code restart-namenode}: the NameNode starts again on the same port from its own
 *       metadata, and the command is done once the DataNodes have registered again and the
 *       NameNode has left safe mode, so clients can write at once.
 *   <li>{@code stop-datanode I}: the DataNode at index {@code I} of those still running (0, 1
 *       or 2 at first) stops at once, its open connections dropped, as when its machine dies;
 *       it is not restarted.
 * </ul>
 */
public final class DfsLauncher {
  /** The logical name service the written hdfs-site.xml declares. */
  static final String NAMESERVICE = "minidfs";

  private DfsLauncher() {}

  public static void main(String[] args) {
    try {
      run(args);
    } catch (Throwable t) {
      // Hadoop's service threads are not daemons: without an explicit exit a failed start would
      // leave a JVM that never prints READY and never ends.
      t.printStackTrace();
      System.exit(1);
    }
  }

  private static void run(String[] args) throws Exception {
    if (args.length != 1 && !(args.length == 3 && args[1].equals("--watch-pid"))) {
      System.err.println("usage: DfsLauncher CONF_DIR [--watch-pid PID]");
      System.exit(2);
    }
    File confDir = new File(args[0]).getAbsoluteFile();
    Files.createDirectories(confDir.toPath());
    Long watched = args.length == 3 ? Long.parseLong(args[2]) : null;

    Configuration conf = new Configuration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(confDir, "data").getPath());
    // Small blocks, so a checkpoint's files span several blocks and block boundaries are tested.
    conf.setLong("dfs.blocksize", 1024 * 1024);
    conf.setInt("dfs.namenode.fs-limits.min-block-size", 64 * 1024);
    // Tests delete and recreate directories quickly; the trash would keep them.
    conf.setInt("fs.trash.interval", 0);
    // Build machines often have full-ish disks; do not let the NameNode enter safe mode for it.
    conf.setLong("dfs.namenode.resource.du.reserved", 0);
    conf.set("dfs.namenode.rpc-bind-host", "127.0.0.1");
    conf.set("dfs.namenode.http-address", "127.0.0.1:0");
    conf.set("dfs.datanode.address", "127.0.0.1:0");
    conf.set("dfs.datanode.http.address", "127.0.0.1:0");
    conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
    // Fast heartbeats: a DataNode that dies is noticed within seconds, not ten minutes. It is
    // stale after 3 s without a heartbeat, and new blocks avoid stale DataNodes (with three
    // DataNodes and three replicas every pipeline would otherwise hold the lost one until it
    // is dead); it is dead after 2 rechecks + 10 heartbeats = 12 s.
    conf.setLong("dfs.heartbeat.interval", 1);
    conf.setLong("dfs.namenode.stale.datanode.interval", 3000);
    conf.setBoolean("dfs.namenode.avoid.write.stale.datanode", true);
    conf.setBoolean("dfs.namenode.avoid.read.stale.datanode", true);
    conf.setInt("dfs.namenode.heartbeat.recheck-interval", 1000);
    // A restarted NameNode leaves safe mode as soon as the DataNodes have reported its blocks.
    conf.setInt("dfs.namenode.safemode.extension", 0);

    MiniDFSCluster cluster =
        new MiniDFSCluster.Builder(conf)
            .numDataNodes(3)
            .nameNodePort(0)
            .format(true)
            .manageNameDfsDirs(true)
            .manageDataDfsDirs(true)
            .build();
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  try {
                    cluster.shutdown(true);
                  } catch (Throwable t) {
                    // Nothing to do: the JVM is going away either way.
                  }
                }));
    cluster.waitActive();
    cluster.waitClusterUp();

    int port = cluster.getNameNodePort();
    String namenode = "127.0.0.1:" + port;

    Map<String, String> core = new TreeMap<>();
    core.put("fs.defaultFS", "hdfs://" + namenode);
    core.put("hadoop.security.authentication", "simple");
    Map<String, String> hdfs = new TreeMap<>();
    hdfs.put("dfs.replication", "3");
    hdfs.put("dfs.nameservices", NAMESERVICE);
    hdfs.put("dfs.ha.namenodes." + NAMESERVICE, "nn1");
    hdfs.put("dfs.namenode.rpc-address." + NAMESERVICE + ".nn1", namenode);
    hdfs.put(
        "dfs.client.failover.proxy.provider." + NAMESERVICE,
        "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider");
    writeSite(new File(confDir, "core-site.xml"), core);
    writeSite(new File(confDir, "hdfs-site.xml"), hdfs);

    String ready = "READY namenode=" + namenode + " nameservice=" + NAMESERVICE;
    System.out.println(ready);
    System.out.flush();
    Files.write(
        new File(confDir, "ready").toPath(), (ready + "\n").getBytes(StandardCharsets.UTF_8));

    File control = new File(confDir, "control");
    Files.createDirectories(control.toPath());
    while (watched == null || ProcessHandle.of(watched).map(ProcessHandle::isAlive).orElse(false)) {
      runCommands(cluster, port, control);
      Thread.sleep(100);
    }
    System.exit(0);
  }

  /**
   * Runs the commands in {@code control} that have no answer yet, in the order of their SEQ;
   * {@code port} is the NameNode's.
   */
  private static void runCommands(MiniDFSCluster cluster, int port, File control)
      throws IOException {
    File[] commands = control.listFiles((dir, name) -> name.matches("[0-9]+\\.cmd"));
    if (commands == null) {
      return;
    }
    Arrays.sort(
        commands, Comparator.comparingLong(f -> Long.parseLong(f.getName().split("\\.")[0])));
    for (File command : commands) {
      String seq = command.getName().split("\\.")[0];
      File done = new File(control, seq + ".done");
      if (done.exists()) {
        continue;
      }
      String text =
          new String(Files.readAllBytes(command.toPath()), StandardCharsets.UTF_8).trim();
      String answer;
      try {
        execute(cluster, port, text);
        answer = "ok";
      } catch (Throwable t) {
        answer = "error: " + text + ": " + t;
      }
      System.out.println("control " + seq + ": " + text + ": " + answer);
      System.out.flush();
      File tmp = new File(control, seq + ".done.tmp");
      Files.write(tmp.toPath(), (answer + "\n").getBytes(StandardCharsets.UTF_8));
      Files.move(tmp.toPath(), done.toPath(), StandardCopyOption.ATOMIC_MOVE);
    }
  }

  /** Runs one control command (see the class's doc); {@code port} is the NameNode's. */
  private static void execute(MiniDFSCluster cluster, int port, String command)
      throws Exception {
    String[] words = command.split("\\s+");
    switch (words[0]) {
      case "stop-namenode":
        cluster.shutdownNameNode(0);
        break;
      case "restart-namenode":
        {
          cluster.restartNameNode(0, true);
          cluster.waitActive();
          long deadline = System.currentTimeMillis() + 60_000;
          while (cluster.getNameNode(0).isInSafeMode()) {
            if (System.currentTimeMillis() > deadline) {
              throw new IOException("the restarted NameNode is still in safe mode after 60 s");
            }
            Thread.sleep(100);
          }
          if (cluster.getNameNodePort() != port) {
            throw new IOException(
                "the NameNode restarted on port " + cluster.getNameNodePort() + ", not " + port);
          }
          break;
        }
      case "stop-datanode":
        {
          if (words.length != 2) {
            throw new IllegalArgumentException("usage: stop-datanode INDEX");
          }
          if (cluster.stopDataNode(Integer.parseInt(words[1])) == null) {
            throw new IllegalArgumentException("no DataNode " + words[1]);
          }
          break;
        }
      default:
        throw new IllegalArgumentException(
            "unknown command (stop-namenode, restart-namenode, stop-datanode I)");
    }
  }

  /** Writes a Hadoop site file (all properties, sorted), renamed into place when complete. */
  private static void writeSite(File site, Map<String, String> properties) throws IOException {
    StringBuilder xml = new StringBuilder();
    xml.append("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<configuration>\n");
    for (Map.Entry<String, String> p : properties.entrySet()) {
      xml.append("  <property>\n    <name>")
          .append(p.getKey())
          .append("</name>\n    <value>")
          .append(p.getValue())
          .append("</value>\n  </property>\n");
    }
    xml.append("</configuration>\n");
    File tmp = new File(site.getPath() + ".tmp");
    Files.write(tmp.toPath(), xml.toString().getBytes(StandardCharsets.UTF_8));
    Files.move(
        tmp.toPath(),
        site.toPath(),
        StandardCopyOption.REPLACE_EXISTING,
        StandardCopyOption.ATOMIC_MOVE);
  }
}
