// WatchProbe drives Apache ZooKeeper's own Java client through persistent and recursive watches
// (addWatch), their removal (removeWatches, checkWatches), their reset after a reconnect
// (setWatches2), events filtered by ACL, and multiRead, and prints what the client saw, without
// what differs between servers by design (zxids, times, session ids).
//
// Usage: java -cp <zookeeper's classpath> WatchProbe.java <host:port> <root>
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.Watcher.WatcherType;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

public class WatchProbe {
    interface Call {
        Object run() throws Exception;
    }

    static String root;
    static final Map<String, List<String>> seen = new TreeMap<>();
    static final Semaphore connected = new Semaphore(0);

    // recorder is a watcher that notes every event it is given under its label.
    static Watcher recorder(String label) {
        synchronized (seen) {
            seen.putIfAbsent(label, new ArrayList<>());
        }
        return e -> {
            String path = e.getPath() == null ? "" : " " + e.getPath().replace(root, "R");
            String what = e.getType() == Watcher.Event.EventType.None ? "None " + e.getState() : e.getType().toString();
            synchronized (seen) {
                seen.get(label).add(what + path);
            }
        };
    }

    static String show(Object o) {
        if (o instanceof Stat) {
            Stat s = (Stat) o;
            return "stat(version=" + s.getVersion() + " dataLength=" + s.getDataLength() + " numChildren=" + s.getNumChildren() + ")";
        }
        if (o instanceof byte[]) {
            return "'" + new String((byte[]) o) + "'";
        }
        if (o instanceof List) {
            List<String> parts = new ArrayList<>();
            for (Object x : (List<?>) o) {
                parts.add(show(x));
            }
            return parts.toString();
        }
        if (o instanceof OpResult.GetDataResult) {
            OpResult.GetDataResult r = (OpResult.GetDataResult) o;
            return "data " + show(r.getData()) + " " + show(r.getStat());
        }
        if (o instanceof OpResult.GetChildrenResult) {
            // ZooKeeper lists children in no particular order (its own hash order).
            List<String> kids = new ArrayList<>(((OpResult.GetChildrenResult) o).getChildren());
            kids.sort(null);
            return "children " + kids;
        }
        if (o instanceof OpResult.ErrorResult) {
            return "error " + KeeperException.Code.get(((OpResult.ErrorResult) o).getErr());
        }
        return String.valueOf(o).replace(root, "R");
    }

    static void step(String what, Call call) {
        String out;
        try {
            out = show(call.run());
        } catch (KeeperException e) {
            out = "error " + e.code();
        } catch (Exception e) {
            out = "exception " + e.getClass().getSimpleName();
        }
        System.out.println(what.replace(root, "R") + " -> " + out);
    }

    // checkpoint waits until w has received every event of the writes made so far (an event of
    // w's own later write reaches its single event thread after all of them), then prints and
    // clears what each watcher saw.
    static void checkpoint(ZooKeeper w, String name) throws Exception {
        String mark = root + "-mark";
        CountDownLatch fired = new CountDownLatch(1);
        w.exists(mark, e -> fired.countDown());
        w.create(mark, null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        if (!fired.await(20, TimeUnit.SECONDS)) {
            throw new IllegalStateException("the checkpoint's event never came");
        }
        w.delete(mark, -1);
        System.out.println("== " + name);
        synchronized (seen) {
            for (Map.Entry<String, List<String>> e : seen.entrySet()) {
                System.out.println("  " + e.getKey() + ": " + e.getValue());
                e.getValue().clear();
            }
        }
    }

    static ZooKeeper connect(String server, Watcher watcher) throws Exception {
        CountDownLatch up = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(server, 10000, e -> {
            if (watcher != null) {
                watcher.process(e);
            }
            if (e.getState() == KeeperState.SyncConnected) {
                up.countDown();
            }
        });
        if (!up.await(20, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no connection to " + server);
        }
        return zk;
    }

    public static void main(String[] args) throws Exception {
        String server = args[0];
        root = args[1];
        String r = root;
        ZooKeeper w = connect(server, e -> {
            if (e.getState() == KeeperState.SyncConnected) {
                connected.release();
            }
        });
        connected.drainPermits();
        ZooKeeper a = connect(server, null);
        a.addAuthInfo("digest", "alice:secret".getBytes());

        step("create R", () -> w.create(r, "r".getBytes(), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
        Watcher rec = recorder("recursive R");
        Watcher per = recorder("persistent R/p");
        step("addWatch R recursive", () -> { w.addWatch(r, rec, AddWatchMode.PERSISTENT_RECURSIVE); return "ok"; });
        step("addWatch R/p persistent", () -> { w.addWatch(r + "/p", per, AddWatchMode.PERSISTENT); return "ok"; });
        step("addWatch bad path", () -> { w.addWatch("nope", rec, AddWatchMode.PERSISTENT); return "ok"; });
        step("create R/p", () -> w.create(r + "/p", "1".getBytes(), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
        step("create R/p/c", () -> w.create(r + "/p/c", "2".getBytes(), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
        step("set R/p", () -> w.setData(r + "/p", "3".getBytes(), -1));
        step("create R/q/ (other session)", () -> a.create(r + "/q", "q".getBytes(), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
        step("create R/q/d/e", () -> {
            w.create(r + "/q/d", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            return w.create(r + "/q/d/e", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        });
        step("delete R/p/c", () -> { w.delete(r + "/p/c", -1); return "ok"; });
        step("multi on R/p", () -> a.multi(Arrays.asList(
            Op.setData(r + "/p", "4".getBytes(), -1),
            Op.create(r + "/p/m", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
            Op.delete(r + "/p/m", -1))).size());
        checkpoint(w, "persistent and recursive watches");

        Watcher once = recorder("once R/p");
        Watcher existsOnce = recorder("exists R/p/n");
        Watcher childOnce = recorder("children R/p");
        step("get R/p with a watch", () -> w.getData(r + "/p", once, null));
        step("exists R/p/n with a watch", () -> w.exists(r + "/p/n", existsOnce));
        step("children R/p with a watch", () -> w.getChildren(r + "/p", childOnce));
        step("set R/p twice", () -> { w.setData(r + "/p", "5".getBytes(), -1); return w.setData(r + "/p", "6".getBytes(), -1); });
        step("create R/p/n (other session)", () -> a.create(r + "/p/n", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
        checkpoint(w, "with one-time watches on the same path");

        Watcher hidden = recorder("once R/q");
        step("create R/secret (alice only)", () -> a.create(r + "/secret", "s".getBytes(), Ids.CREATOR_ALL_ACL, CreateMode.PERSISTENT));
        step("set R/secret", () -> a.setData(r + "/secret", "t".getBytes(), -1));
        step("create R/secret/kid (open)", () -> a.create(r + "/secret/kid", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
        step("get R/q with a watch", () -> w.getData(r + "/q", hidden, null));
        step("setACL R/q alice only", () -> a.setACL(r + "/q", Ids.CREATOR_ALL_ACL, -1));
        step("set R/q", () -> a.setData(r + "/q", "hidden".getBytes(), -1));
        step("setACL R/q open", () -> a.setACL(r + "/q", Ids.OPEN_ACL_UNSAFE, -1));
        step("set R/q again", () -> a.setData(r + "/q", "shown".getBytes(), -1));
        step("setACL R/p alice only", () -> a.setACL(r + "/p", Ids.CREATOR_ALL_ACL, -1));
        step("set R/p", () -> a.setData(r + "/p", "7".getBytes(), -1));
        step("create R/p/x", () -> a.create(r + "/p/x", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
        step("setACL R/p open", () -> a.setACL(r + "/p", Ids.OPEN_ACL_UNSAFE, -1));
        step("delete R/secret/kid and R/secret", () -> {
            a.delete(r + "/secret/kid", -1);
            a.delete(r + "/secret", -1);
            return "ok";
        });
        checkpoint(w, "events the watcher may not read");

        step("multiRead", () -> w.multi(Arrays.asList(
            Op.getData(r + "/p"), Op.getChildren(r + "/q"), Op.getData(r + "/missing"), Op.getChildren(r + "/p"))));
        step("create R/locked", () -> a.create(r + "/locked", "l".getBytes(), Ids.CREATOR_ALL_ACL, CreateMode.PERSISTENT));
        step("multiRead with NoAuth", () -> w.multi(Arrays.asList(Op.getData(r + "/locked"), Op.getData(r))));
        step("alice multiRead", () -> a.multi(Arrays.asList(Op.getData(r + "/locked"), Op.getChildren(r + "/locked"))));

        step("removeWatches R/p persistent", () -> { w.removeWatches(r + "/p", per, WatcherType.Persistent, false); return "ok"; });
        step("removeWatches R/p persistent again", () -> { w.removeWatches(r + "/p", per, WatcherType.Persistent, false); return "ok"; });
        step("removeAllWatches R/p data", () -> { w.removeAllWatches(r + "/p", WatcherType.Data, false); return "ok"; });
        step("removeAllWatches R/p persistent", () -> { w.removeAllWatches(r + "/p", WatcherType.Persistent, false); return "ok"; });
        step("removeAllWatches R/p persistent again", () -> { w.removeAllWatches(r + "/p", WatcherType.Persistent, false); return "ok"; });
        step("set R/p", () -> w.setData(r + "/p", "8".getBytes(), -1));
        step("removeAllWatches R recursive", () -> { w.removeAllWatches(r, WatcherType.PersistentRecursive, false); return "ok"; });
        step("removeAllWatches R any", () -> { w.removeAllWatches(r, WatcherType.Any, false); return "ok"; });
        step("set R/p again", () -> w.setData(r + "/p", "9".getBytes(), -1));
        checkpoint(w, "after removing them");

        Watcher rec2 = recorder("recursive R/q");
        Watcher per2 = recorder("persistent R/q/d");
        Watcher once2 = recorder("once R/q/d");
        step("addWatch R/q recursive", () -> { w.addWatch(r + "/q", rec2, AddWatchMode.PERSISTENT_RECURSIVE); return "ok"; });
        step("addWatch R/q/d persistent", () -> { w.addWatch(r + "/q/d", per2, AddWatchMode.PERSISTENT); return "ok"; });
        step("children R/q/d with a watch", () -> w.getChildren(r + "/q/d", once2));
        step("drop the connection", () -> {
            w.getTestable().closeSocket();
            if (!connected.tryAcquire(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("no reconnection");
            }
            // The client resets its watches first thing on a reconnect (setWatches2): once a
            // later request is answered, they are set again, so no write below can beat them.
            w.exists(r, false);
            return "reconnected";
        });
        step("set R/q/d and create R/q/d/f", () -> {
            a.setData(r + "/q/d", "d".getBytes(), -1);
            return a.create(r + "/q/d/f", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        });
        step("delete R/q/d/e (ephemeral of the watcher's session)", () -> { w.delete(r + "/q/d/e", -1); return "ok"; });
        checkpoint(w, "after a reconnect");

        w.close();
        a.close();
    }
}
