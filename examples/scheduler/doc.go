// Package scheduler is a job scheduler that runs on ssfkit's coordination service: several
// long-running workers elect one leader, which runs a scheduled job through an SSF once per
// time slot, and any worker may run a maintenance task that only one may run at a time,
// guarded by a distributed lock. The recipes are ZooKeeper's own, on the unmodified
// github.com/go-zookeeper/zk client, so the same code runs against Apache ZooKeeper.
//
// Who holds what, and why:
//
//   - The workers (Worker, one per process: cmd/worker) hold the ZooKeeper sessions: an
//     election (Campaign, /scheduler/election) and a lock (Acquire,
//     /scheduler/locks/maintenance) are ephemeral znodes that live as long as a session, and
//     a session needs a process that stays up to heartbeat it. SSFs are short-lived and
//     hold none.
//   - The SSF (jobs) holds the state: the schedule's cursor, one record per slot run, the
//     report. The workers reach it by invoking it (Invoker), as a platform would, with an
//     instance id per request, so a request sent again runs once.
//   - What crosses from one to the other is the fencing token: the czxid of the leader's (or
//     lock holder's) znode, carried in every request.
//
// # Fencing
//
// An election or a lock cannot by itself keep a deposed holder from acting: a holder paused
// (GC, a stalled VM) or partitioned past its session timeout is deposed by the server without
// hearing of it, and whatever it sends before it notices is sent by a stale holder. So the
// resource checks. Tokens are increasing in the order the role was held (recipe.go), and the
// SSF keeps, in each item a role writes, the newest token it accepted: a request with an older
// token is refused (ErrFenced), and the check is part of the same conditional write as the
// change (on the item's Version), so no newer holder's write can come between the check and
// the write. Hence, for each item: once a holder's write is in, no write of an earlier holder
// is ever accepted; the writes are ordered as the holds were. Exactly-once (ssfkit) and
// fencing do different jobs: ssfkit makes each request take effect once however often it is
// retried or re-executed; fencing makes requests of a deposed holder take no effect at all.
//
// The tests run every recipe and failure on ssfkit's endpoint (mem and SQLite tables) and on
// a real Apache ZooKeeper, with partitions made by a TCP proxy that black-holes a client, and
// show that each fencing check
// is needed: with it disabled, TestStaleLeaderIsFenced finds a slot run by the deposed leader
// after the new one's, and TestStaleLockHolderIsFenced a report rolled back by the deposed
// holder's publish.
package scheduler
