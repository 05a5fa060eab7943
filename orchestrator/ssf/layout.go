package ssf

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// An SSF keeps all of its state in one store table (one per SSF: Beldi's data sovereignty).
// Beldi's tables become partitions of that table, distinguished by a one-letter prefix:
//
//	d|TABLE|KEY    linked DAAL of one data item; sort key = row id (head = 0, increasing)
//	i|ID           one instance: sort key "intent" is its intent row, "r|STEP" its read-log
//	               entries, "v|STEP" its invoke-log entries, "w|STEP" its writes' provenance
//	               records, so GC drops (and exports) an instance's logs with one scan of one
//	               partition
//	p|SHARD        unfinished-intent index (Beldi's secondary index): sort key = instance id
//	f|SHARD        finished-intent index the GC stamps with finish times (and names the
//	               caller SSF of a synchronously called instance)
//	c|SHARD        tombstones of collected instances: sort key = collection time|id, oldest first
//	e|SHARD        expired keys (tombstones without a result): sort key = expiry time|id
//	k|SHARD        directory of linked DAALs (items), so the GC can visit them all
//	s|TX|TABLE|KEY a transaction's shadow DAAL of an item
//	x|TX           what a transaction locked and called from this SSF
//	o|owner        the SSF that owns the table (ClaimTable)
//	b|export       provenance export batches: sort key = the batch's name (see exportPartition)
//
// Table names are identifiers (no '|'), so the first '|' after the table ends it.
var ownerKey = store.Key{Partition: "o|owner", Sort: "owner"}

const (
	intentSort = "intent"
	headRowID  = "00000000000000000000"
)

// DAAL row attributes (Beldi Fig. 4).
const (
	attrValue        = "Value"        // []byte JSON; absent means null
	attrLogSize      = "LogSize"      // int64 entries in RecentWrites
	attrNextRow      = "NextRow"      // string row id of the successor
	attrRecentWrites = "RecentWrites" // map logKey -> bool (the write log; false = cond failed), or int64 for a versioned write (versionEntry)
	attrSeq          = "Seq"          // int64 the item's version: versioned writes that applied to it (provenance)
	attrVersion      = "Ver"          // int64, bumped by every change; pins conditional writes
	attrDangleTime   = "DangleTime"   // int64 unix nanos when the GC found the row unreachable
	attrPriorWrites  = "PriorWrites"  // []byte summary (fingerprints or a Bloom filter) of the log keys of the rows before a successor (priorwrites.go)
	attrLockOwner    = "LockOwner"    // string transaction id (or instance) holding the item's lock
	attrLockStart    = "LockStart"    // int64 the holder's intent-creation time (wait-die age)
	attrTxValue      = "TxValue"      // []byte JSON the lock holder's uncommitted value ("null" included): a transaction's write until its end
)

// Intent row and log attributes (Beldi Fig. 3).
const (
	attrArgs        = "Args"        // []byte JSON input
	attrAsync       = "Async"       // bool: launched by AsyncInvoke; no callback at the end
	attrDone        = "Done"        // bool
	attrResult      = "Result"      // []byte JSON Result
	attrCaller      = "Caller"      // string caller SSF for the callback
	attrCallerID    = "CallerID"    // string caller instance id
	attrCallerStep  = "CallerStep"  // int64 caller step
	attrStart       = "Start"       // int64 unix nanos the intent was created (wait-die age)
	attrLaunched    = "Launched"    // int64 unix nanos of the last launch (pending index)
	attrFinishTime  = "FinishTime"  // int64 unix nanos the GC first saw the intent done
	attrKind        = "Kind"        // string: what a log row records
	attrCallee      = "Callee"      // string callee SSF (invoke log)
	attrCalleeID    = "CalleeID"    // string callee instance id (invoke log)
	attrTxID        = "TxID"        // string transaction the instance runs in (inherited)
	attrTxStart     = "TxStart"     // int64 that transaction's wait-die age
	attrBuiltin     = "Builtin"     // string runtime handler the instance runs (tx-end)
	attrHolder      = "Holder"      // string what may re-send the request after it finished (Request.Holder)
	attrHeldIndex   = "HeldIndex"   // bool: in the finished index from creation; its holder retries it
	attrEndsTx      = "EndsTx"      // string, on a read-log entry of runtimes before this one: the transaction whose record an owner's step listed to end it
	attrCollected   = "Collected"   // int64 unix nanos the GC collected the instance; the intent is a tombstone since
	attrVoid        = "Void"        // int64 unix nanos the IC gave up on an intent whose creation never landed (see voidIntent)
	attrInputHash   = "InputHash"   // string digest of the request's input, kept in the tombstone (see inputDigest)
	attrExpired     = "Expired"     // int64 unix nanos the tombstone's result was dropped (Config.KeyRetention)
	attrOwner       = "SSF"         // string, on the owner row: the SSF the table belongs to
	attrAttempts    = "Attempts"    // int64, on a pending-index entry: launches by the intent collector
	attrLastExec    = "LastExec"    // int64 unix nanos the latest re-execution started (its fence); see claimExecution
	attrHoldsLocks  = "HoldsLocks"  // bool: a held instance takes locks (Env.markLocks)
	attrLastError   = "LastError"   // string why the latest execution was abandoned, for the give-up record
	attrTrace       = "Trace"       // string W3C traceparent of the invoking step (Request.Trace)
	attrTraceID     = "TraceID"     // string, without Trace: the trace the request arrived in (provenance)
	attrFinished    = "Finished"    // int64 unix nanos the deciding execution recorded the result (provenance)
	attrExportBatch = "ExportBatch" // string, on a finished-index entry: the provenance batch that claimed the instance
	attrCandidates  = "Candidates"  // []byte JSON ids, on a provenance batch row (b|export)
	attrExported    = "Exported"    // bool, on a provenance batch row: its records are in the sink
)

// Provenance attributes of log entries (adapters/provenance): the item a read-log entry read, or
// a write record ("w|STEP") wrote, with its version.
const (
	attrItemTable   = "ItemTable" // string
	attrItemKey     = "ItemKey"   // string
	attrItemVersion = "ItemVer"   // int64 the item's version (absent for a transaction's shadow)
	attrShadow      = "Shadow"    // bool the transaction's own copy of the item
	attrApplied     = "Applied"   // bool a write's outcome
	attrDigest      = "Digest"    // string SHA-256 (base64url) of the written value
	attrWritten     = "Written"   // []byte the written value (provenance.CaptureFull)
	attrAt          = "At"        // int64 unix nanos the step was taken
)

func dataPartition(table, key string) string { return "d|" + table + "|" + key }

// txPartition records, per SSF, what a transaction's participants touched here: sort key
// "k|TABLE|KEY" for an item they locked, "c|SSF" for an SSF they called. A participant's end
// starts from it when the caller did not learn the list from the participants' results.
func txPartition(txID string) string     { return "x|" + txID }
func instancePartition(id string) string { return "i|" + id }
func intentKey(id string) store.Key {
	return store.Key{Partition: instancePartition(id), Sort: intentSort}
}
func readLogKey(id string, step int) store.Key {
	return store.Key{Partition: instancePartition(id), Sort: fmt.Sprintf("r|%08d", step)}
}
func writeRecordKey(id string, step int) store.Key {
	return store.Key{Partition: instancePartition(id), Sort: fmt.Sprintf("w|%08d", step)}
}
func invokeLogKey(id string, step int) store.Key {
	return store.Key{Partition: instancePartition(id), Sort: fmt.Sprintf("v|%08d", step)}
}
func pendingKey(shards int, id string) store.Key {
	return store.Key{Partition: "p|" + strconv.Itoa(shard(shards, id)), Sort: id}
}
func finishedKey(shards int, id string) store.Key {
	return store.Key{Partition: "f|" + strconv.Itoa(shard(shards, id)), Sort: id}
}
func tombstoneKey(shards int, id string, collected int64) store.Key {
	return store.Key{Partition: "c|" + strconv.Itoa(shard(shards, id)), Sort: fmt.Sprintf("%020d|%s", collected, id)}
}
func expiredKeyIndex(shards int, id string, expired int64) store.Key {
	return store.Key{Partition: "e|" + strconv.Itoa(shard(shards, id)), Sort: fmt.Sprintf("%020d|%s", expired, id)}
}
func directoryKey(shards int, partition string) store.Key {
	return store.Key{Partition: "k|" + strconv.Itoa(shard(shards, partition)), Sort: partition}
}

func shard(n int, s string) int {
	h := fnv.New32a()
	h.Write([]byte(s))
	return int(h.Sum32() % uint32(n))
}

// logKey identifies one step of one instance in a DAAL's RecentWrites. The incarnation keeps
// an instance whose id was used before, by an instance since collected, from taking that
// instance's entries (still in a head or tail row) for its own.
func logKey(id, incarnation string, step int) string {
	return id + "#" + incarnation + "#" + strconv.Itoa(step)
}

// logKeyInstance returns the instance id and incarnation of a logKey.
func logKeyInstance(k string) (id, incarnation string) {
	rest, _, _ := cutLast(k, '#')
	id, incarnation, ok := cutLast(rest, '#')
	if !ok {
		return rest, ""
	}
	return id, incarnation
}

func cutLast(s string, sep byte) (before, after string, found bool) {
	if i := strings.LastIndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// Row ids increase along a linked DAAL: a row's successor is always id+1 when it is appended, so
// concurrent appenders agree on the successor and a crashed append leaves no leaked row.
func rowID(n uint64) string { return fmt.Sprintf("%020d", n) }

func nextRowID(id string) (string, error) {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return "", fmt.Errorf("%w: bad DAAL row id %q", ErrCorrupt, id)
	}
	return rowID(n + 1), nil
}
