package sluice.yarn;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
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
    // Fast heartbeats: a DataNode that dies is noticed within seconds, not ten minutes.
    conf.setLong("dfs.heartbeat.interval", 1);

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

    String namenode = "127.0.0.1:" + cluster.getNameNodePort();

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

    if (watched != null) {
      while (ProcessHandle.of(watched).map(ProcessHandle::isAlive).orElse(false)) {
        Thread.sleep(500);
      }
      System.exit(0);
    } else {
      Thread.currentThread().join();
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
