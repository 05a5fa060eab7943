"""Runs kazoo's recipes against a ZooKeeper endpoint and checks what they promise.

Usage: python kazoo_recipes.py HOST:PORT ROOT
Prints one line per recipe ("ok NAME: detail" or "FAIL NAME: why") and exits 1 if any failed.
Each recipe runs under ROOT with several clients (one session each) racing in threads.
"""
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.recipe.barrier import Barrier
from kazoo.recipe.counter import Counter
from kazoo.recipe.election import Election
from kazoo.recipe.lock import Lock
from kazoo.recipe.party import Party
from kazoo.recipe.queue import LockingQueue, Queue
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

HOSTS, ROOT = sys.argv[1], sys.argv[2]
TIMEOUT = 20
results = []


def client():
    c = KazooClient(hosts=HOSTS, timeout=10)
    c.start(timeout=TIMEOUT)
    return c


def check(name, ok, detail):
    results.append(ok)
    print(("ok " if ok else "FAIL ") + name + ": " + detail, flush=True)


def run_threads(n, target):
    errors = []

    def wrap(i):
        try:
            target(i)
        except Exception as e:  # reported, not swallowed
            errors.append(repr(e))

    threads = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    return errors + ["thread %d did not finish" % i for i, t in enumerate(threads) if t.is_alive()]


def lock():
    clients = [client() for _ in range(3)]
    inside, overlaps, entries = [0], [0], [0]
    guard = threading.Lock()

    def contend(i):
        lk = Lock(clients[i], ROOT + "/lock", identifier="c%d" % i)
        for _ in range(5):
            with lk:
                with guard:
                    inside[0] += 1
                    entries[0] += 1
                    if inside[0] > 1:
                        overlaps[0] += 1
                time.sleep(0.005)
                with guard:
                    inside[0] -= 1

    errors = run_threads(3, contend)
    check("Lock", not errors and overlaps[0] == 0 and entries[0] == 15,
          "%d entries, %d overlaps, errors %s" % (entries[0], overlaps[0], errors))
    for c in clients:
        c.stop()


def election():
    clients = [client() for _ in range(3)]
    leaders, leading, overlaps = [], [0], [0]
    guard = threading.Lock()

    def lead(i):  # returning gives up leadership: the next contender is elected
        with guard:
            leaders.append(i)
            leading[0] += 1
            if leading[0] > 1:
                overlaps[0] += 1
        time.sleep(0.05)
        with guard:
            leading[0] -= 1

    errors = run_threads(3, lambda i: Election(clients[i], ROOT + "/election", identifier="c%d" % i).run(lead, i))
    check("Election", sorted(leaders) == [0, 1, 2] and overlaps[0] == 0 and not errors,
          "leaders in turn %s, %d overlaps, errors %s" % (leaders, overlaps[0], errors))
    for c in clients:
        c.stop()


def barrier():
    c = client()
    b = Barrier(c, ROOT + "/barrier")
    b.create()
    passed = []
    waiter = threading.Thread(target=lambda: passed.append(b.wait(TIMEOUT)))
    waiter.start()
    time.sleep(0.3)
    blocked = waiter.is_alive()
    b.remove()
    waiter.join(TIMEOUT)
    check("Barrier", blocked and passed == [True], "blocked while up: %s, passed after removal: %s" % (blocked, passed))
    c.stop()


def counter():
    clients = [client() for _ in range(4)]

    def add(i):
        cnt = Counter(clients[i], ROOT + "/counter")
        for _ in range(10):
            cnt += 1

    errors = run_threads(4, add)
    value = Counter(clients[0], ROOT + "/counter").value
    check("Counter", not errors and value == 40, "value %s after 40 racing increments, errors %s" % (value, errors))
    for c in clients:
        c.stop()


def queue():
    c = client()
    q = Queue(c, ROOT + "/queue")
    for i in range(5):
        q.put(b"item-%d" % i)
    got = [q.get() for _ in range(5)]
    lq = LockingQueue(c, ROOT + "/lqueue")
    lq.put(b"a")
    lq.put(b"b", priority=10)  # a lower number comes out first
    first = lq.get(TIMEOUT)
    consumed = lq.consume()
    second = lq.get(TIMEOUT)
    lq.consume()
    ok = got == [b"item-%d" % i for i in range(5)] and first == b"b" and consumed and second == b"a"
    check("Queue", ok, "queue order %s, locking queue %s then %s" % (got, first, second))
    c.stop()


def party():
    clients = [client() for _ in range(3)]
    parties = [Party(clients[i], ROOT + "/party", "member-%d" % i) for i in range(3)]
    for p in parties:
        p.join()
    full = sorted(parties[0])
    clients[1].stop()  # its membership is ephemeral
    deadline = time.time() + TIMEOUT
    while len(parties[0]) != 2 and time.time() < deadline:
        time.sleep(0.05)
    after = sorted(parties[0])
    parties[2].leave()
    left = sorted(parties[0])
    check("Party", full == ["member-0", "member-1", "member-2"] and after == ["member-0", "member-2"] and left == ["member-0"],
          "members %s, after a session ended %s, after a leave %s" % (full, after, left))
    for i in (0, 2):
        clients[i].stop()


def watchers():
    c = client()
    other = client()
    c.ensure_path(ROOT + "/watched")
    seen_data, seen_children = [], []
    got_data, got_children = threading.Event(), threading.Event()

    def on_data(data, stat):
        seen_data.append(data)
        if data == b"v2":
            got_data.set()

    def on_children(children):
        seen_children.append(sorted(children))
        if sorted(children) == ["k1", "k2"]:
            got_children.set()

    DataWatch(c, ROOT + "/watched", on_data)
    ChildrenWatch(c, ROOT + "/watched", on_children)
    other.set(ROOT + "/watched", b"v1")
    other.set(ROOT + "/watched", b"v2")
    other.create(ROOT + "/watched/k1")
    other.create(ROOT + "/watched/k2")
    ok = got_data.wait(TIMEOUT) and got_children.wait(TIMEOUT)
    check("DataWatch/ChildrenWatch", ok and seen_data[-1] == b"v2",
          "data seen %s, children seen %s" % (seen_data, seen_children))
    c.stop()
    other.stop()


setup = client()
setup.ensure_path(ROOT)
setup.stop()
for recipe in (lock, election, barrier, counter, queue, party, watchers):
    try:
        recipe()
    except Exception as e:
        check(recipe.__name__, False, "raised %r" % e)
sys.exit(0 if all(results) else 1)
