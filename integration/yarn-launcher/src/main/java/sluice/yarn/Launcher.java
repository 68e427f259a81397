package sluice.yarn;

import java.io.File;
import java.io.FileOutputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

/**
 * Starts a MiniYARNCluster (one ResourceManager, two NodeManagers, all on loopback) for sluice's
 * tests, writes the cluster's effective yarn-site.xml into the directory given as first argument,
 * prints one line {@code READY rm=HOST:PORT scheduler=HOST:PORT web=HOST:PORT} and then runs until
 * killed (or, with {@code --stdin}, until standard input closes).
 *
 * <p>Containers are real local processes started by the NodeManagers' DefaultContainerExecutor,
 * so a test exercises the same launch path as a real cluster.
 */
public final class Launcher {
  private Launcher() {}

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
    if (args.length < 1) {
      System.err.println("usage: Launcher CONF_DIR [--stdin]");
      System.exit(2);
    }
    File confDir = new File(args[0]).getAbsoluteFile();
    boolean exitOnStdinEof = args.length > 1 && args[1].equals("--stdin");
    Files.createDirectories(confDir.toPath());

    YarnConfiguration conf = new YarnConfiguration();
    // A single queue that accepts everything: the default capacity-scheduler.xml is not on the
    // shaded classpath, and without queues every submission is rejected.
    conf.set("yarn.scheduler.capacity.root.queues", "default");
    conf.set("yarn.scheduler.capacity.root.default.capacity", "100");
    conf.set("yarn.scheduler.capacity.root.default.maximum-capacity", "100");
    conf.set("yarn.scheduler.capacity.root.default.state", "RUNNING");
    conf.set("yarn.scheduler.capacity.root.default.acl_submit_applications", "*");
    conf.set("yarn.scheduler.capacity.root.default.acl_administer_queue", "*");
    // The AM share limit defaults to 10 %, which on a small mini cluster refuses to start a
    // second application master.
    conf.set("yarn.scheduler.capacity.maximum-am-resource-percent", "1.0");
    // Build machines often have full-ish disks; a "bad" disk would mark the NodeManager unhealthy.
    conf.set("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage", "100");
    conf.set("yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb", "0");
    // Small containers so that several fit on a 2-core test machine.
    conf.setInt("yarn.scheduler.minimum-allocation-mb", 64);
    conf.setInt("yarn.scheduler.maximum-allocation-mb", 4096);
    conf.setInt("yarn.nodemanager.resource.memory-mb", 4096);
    conf.setInt("yarn.nodemanager.resource.cpu-vcores", 8);
    conf.setInt("yarn.scheduler.maximum-allocation-vcores", 8);
    // Tests measure real processes; memory checks would kill a container for page-cache noise.
    conf.setBoolean("yarn.nodemanager.pmem-check-enabled", false);
    conf.setBoolean("yarn.nodemanager.vmem-check-enabled", false);
    // Keep container directories and logs a little after exit so a failing test can show them.
    conf.setInt("yarn.nodemanager.delete.debug-delay-sec", 600);
    conf.set("yarn.nodemanager.sleep-delay-before-sigkill.ms", "250");
    // Fast heartbeats make allocation visible within a second.
    conf.setInt("yarn.resourcemanager.nodemanagers.heartbeat-interval-ms", 200);
    conf.setBoolean("yarn.minicluster.use-rpc", false);
    conf.setBoolean(YarnConfiguration.YARN_MINICLUSTER_FIXED_PORTS, false);
    conf.set("yarn.resourcemanager.hostname", "127.0.0.1");
    conf.set("yarn.nodemanager.hostname", "127.0.0.1");
    // Application attempts fail over quickly in tests.
    conf.setInt("yarn.resourcemanager.am.max-attempts", 4);

    MiniYARNCluster cluster = new MiniYARNCluster("sluice", 2, 1, 1);
    cluster.init(conf);
    cluster.start();

    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  try {
                    cluster.stop();
                  } catch (Throwable t) {
                    // Nothing to do: the JVM is going away either way.
                  }
                }));

    Configuration effective = cluster.getConfig();
    // The RM binds port 0 first; the real port is known once it has started.
    long deadline = System.currentTimeMillis() + 120_000;
    while (effective.get(YarnConfiguration.RM_ADDRESS, "").endsWith(":0")
        || effective.get(YarnConfiguration.RM_SCHEDULER_ADDRESS, "").endsWith(":0")) {
      if (System.currentTimeMillis() > deadline) {
        throw new IllegalStateException("ResourceManager did not bind its ports");
      }
      Thread.sleep(100);
    }
    // Wait until both NodeManagers have registered, else the first submission may sit in ACCEPTED.
    while (cluster.getResourceManager().getRMContext().getRMNodes().size() < 2) {
      if (System.currentTimeMillis() > deadline) {
        throw new IllegalStateException("NodeManagers did not register");
      }
      Thread.sleep(100);
    }

    File site = new File(confDir, "yarn-site.xml");
    File tmp = new File(confDir, "yarn-site.xml.tmp");
    try (OutputStream out = new FileOutputStream(tmp)) {
      effective.writeXml(out);
    }
    // Rename so a reader never sees a half-written file.
    Files.move(
        tmp.toPath(), site.toPath(), java.nio.file.StandardCopyOption.REPLACE_EXISTING,
        java.nio.file.StandardCopyOption.ATOMIC_MOVE);

    String ready =
        "READY rm="
            + effective.get(YarnConfiguration.RM_ADDRESS)
            + " scheduler="
            + effective.get(YarnConfiguration.RM_SCHEDULER_ADDRESS)
            + " web="
            + effective.get(YarnConfiguration.RM_WEBAPP_ADDRESS);
    System.out.println(ready);
    System.out.flush();
    Files.write(new File(confDir, "ready").toPath(), (ready + "\n").getBytes(StandardCharsets.UTF_8));

    if (exitOnStdinEof) {
      while (System.in.read() >= 0) {
        // Drain until the parent closes our stdin.
      }
      System.exit(0);
    } else {
      Thread.currentThread().join();
    }
  }
}
