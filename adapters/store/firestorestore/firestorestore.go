// Package firestorestore is the Cloud Firestore (native mode) store driver.
//
// URL: firestore://PROJECT/COLLECTION?database=ID&emulator=HOST:PORT&max_row_bytes=N. Credentials
// come from Application Default Credentials; emulator= (or the FIRESTORE_EMULATOR_HOST variable
// every Google client library honours) talks to an emulator without credentials instead.
//
// Layout, which needs no composite index: the rows of partition P are the documents of the
// subcollection COLLECTION/{P}/COLLECTION, one per sort key, with IDs that preserve sort-key
// order (see encodeID); the partition document itself is never written. Naming the
// subcollections after the collection makes each table its own collection group, the unit of
// Firestore's index settings (and of the emulator's query cost, which grows with the group). A row's attributes are one
// store.EncodeAttrs blob in field "a"; field "s" repeats the ID for reverse scans, and field "w"
// holds a token naming the write that produced the document.
//
// A conditional update reads the row, evaluates the condition with the portable evaluator, and
// writes with a precondition: Create (the row must still be absent) or Update with the read's
// update time (the row must be unchanged). A failed precondition means another writer got in
// between, and the update starts over from the read. An update that wants the row absent skips
// the read and tries Create first. Deletes work the same way.
package firestorestore

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ssfkit/ssfkit/adapters/store"
)

func init() { store.Register("firestore", open) }

const (
	// DefaultMaxRowBytes matches DynamoDB's item limit, so a value that fits here fits there.
	DefaultMaxRowBytes = store.PortableMaxRowBytes
	// MaxRowBytesLimit is the largest max_row_bytes accepted: Firestore's 1 MiB document limit
	// less room for the document name (up to about 4.5 KiB with maximal IDs) and field names.
	MaxRowBytesLimit = 1<<20 - 8<<10
	// EmulatorHostEnv is the variable Google's client libraries read to find an emulator.
	EmulatorHostEnv = "FIRESTORE_EMULATOR_HOST"

	blobField = "a"
	// tokenField identifies the write that produced a document; see resolve.
	tokenField = "w"
	// sortField repeats the document ID, for reverse scans: Firestore (the emulator at least)
	// cannot scan document IDs in descending order, but every field has a descending index.
	sortField = "s"
	// probeTimeout bounds Open's check that the database answers when ctx has no deadline:
	// the client library retries an unreachable endpoint for as long as it is allowed to.
	probeTimeout = 30 * time.Second
)

// Driver is a store.Driver over one Firestore collection.
type Driver struct {
	client *firestore.Client
	key    clientKey
	coll   *firestore.CollectionRef
	limits store.Limits
	closed sync.Once
}

// rows returns the collection of a partition's rows.
func (d *Driver) rows(partition *firestore.DocumentRef) *firestore.CollectionRef {
	return partition.Collection(d.coll.ID)
}

// Drivers on one database share a client (and its gRPC connection): an application opens a
// table per SSF, and a connection each would multiply sockets and credential refreshes.
type clientKey struct{ project, database, emulator string }

var (
	clientsMu sync.Mutex
	clients   = map[clientKey]*sharedClient{}
)

type sharedClient struct {
	client *firestore.Client
	refs   int
}

func acquireClient(ctx context.Context, k clientKey) (*firestore.Client, error) {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c, ok := clients[k]; ok {
		c.refs++
		return c.client, nil
	}
	c, err := newClient(ctx, k)
	if err != nil {
		return nil, err
	}
	clients[k] = &sharedClient{client: c, refs: 1}
	return c, nil
}

func releaseClient(k clientKey) {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c, ok := clients[k]; ok {
		if c.refs--; c.refs == 0 {
			c.client.Close()
			delete(clients, k)
		}
	}
}

// testInterceptor, when set by this package's tests, runs inside noteUncertainCommits on
// connections to an emulator named by emulator=, to simulate lost responses.
var testInterceptor grpc.UnaryClientInterceptor

func newClient(ctx context.Context, k clientKey) (*firestore.Client, error) {
	interceptors := []grpc.UnaryClientInterceptor{noteUncertainCommits}
	if testInterceptor != nil {
		interceptors = append(interceptors, testInterceptor)
	}
	var opts []option.ClientOption
	switch {
	case os.Getenv(EmulatorHostEnv) != "":
		// The library dials the emulator itself and ignores dial options; passing a connection of
		// our own would leave its connection open and unused.
	case k.emulator != "":
		conn, err := grpc.NewClient("passthrough:///"+k.emulator,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithPerRPCCredentials(emulatorOwner{}),
			grpc.WithChainUnaryInterceptor(interceptors...),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)))
		if err != nil {
			return nil, fmt.Errorf("%w: emulator=%s: %v", store.ErrInvalid, k.emulator, err)
		}
		opts = append(opts, option.WithGRPCConn(conn)) // the client closes it
	default:
		opts = append(opts, option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(noteUncertainCommits)))
	}
	c, err := firestore.NewClientWithDatabase(ctx, k.project, k.database, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v (production URLs use Application Default Credentials: run `gcloud auth application-default login`, set GOOGLE_APPLICATION_CREDENTIALS, or run on Google Cloud with a service account; add emulator=HOST:PORT for the emulator)", store.ErrInvalid, err)
	}
	return c, nil
}

// emulatorOwner authenticates to the emulator as an administrator, which bypasses security
// rules, as the client library does when it finds FIRESTORE_EMULATOR_HOST.
type emulatorOwner struct{}

func (emulatorOwner) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}

func (emulatorOwner) RequireTransportSecurity() bool { return false }

// uncertainKey marks a write's context with a flag that noteUncertainCommits sets.
type uncertainKey struct{}

// noteUncertainCommits flags the write in ctx when one of its Commit attempts failed in a way
// that leaves open whether it applied (a lost response, say). The client library retries such
// attempts itself, so without this the retry's failed precondition would look like another
// writer's doing, and the update would be evaluated and applied a second time.
func noteUncertainCommits(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if flag, ok := ctx.Value(uncertainKey{}).(*atomic.Bool); ok && err != nil && strings.HasSuffix(method, "/Commit") {
		switch status.Code(err) {
		case codes.FailedPrecondition, codes.AlreadyExists, codes.NotFound, codes.InvalidArgument,
			codes.PermissionDenied, codes.Unauthenticated, codes.ResourceExhausted, codes.Aborted:
			// Rejected: nothing was written.
		default:
			flag.Store(true)
		}
	}
	return err
}

var databaseID = regexp.MustCompile(`^(\(default\)|[a-z][a-z0-9-]{2,61}[a-z0-9])$`)

func open(ctx context.Context, u *store.URL) (store.Driver, error) {
	if err := u.CheckParams("database", "emulator", "max_row_bytes"); err != nil {
		return nil, err
	}
	k := clientKey{project: u.Host, database: u.Param("database", firestore.DefaultDatabaseID), emulator: u.Query.Get("emulator")}
	collection := strings.TrimPrefix(u.Path, "/")
	if k.project == "" || collection == "" {
		return nil, fmt.Errorf("%w: want firestore://PROJECT/COLLECTION", store.ErrInvalid)
	}
	if err := checkCollectionID(collection); err != nil {
		return nil, err
	}
	if !databaseID.MatchString(k.database) {
		return nil, fmt.Errorf("%w: database=%q is not a Firestore database ID ((default), or 4-63 lowercase letters, digits and hyphens)", store.ErrInvalid, k.database)
	}
	if k.emulator != "" {
		if _, port, err := net.SplitHostPort(k.emulator); err != nil || port == "" {
			return nil, fmt.Errorf("%w: emulator=%q must be HOST:PORT", store.ErrInvalid, k.emulator)
		}
	}
	if env := os.Getenv(EmulatorHostEnv); env != "" {
		if k.emulator != "" && k.emulator != env {
			return nil, fmt.Errorf("%w: emulator=%s conflicts with %s=%s; unset the variable or make them agree", store.ErrInvalid, k.emulator, EmulatorHostEnv, env)
		}
		k.emulator = env
	}
	limit := DefaultMaxRowBytes
	if s := u.Query.Get("max_row_bytes"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 256 || n > MaxRowBytesLimit {
			return nil, fmt.Errorf("%w: max_row_bytes=%q must be an integer from 256 to %d", store.ErrInvalid, s, MaxRowBytesLimit)
		}
		limit = n
	}
	client, err := acquireClient(ctx, k)
	if err != nil {
		return nil, err
	}
	d := &Driver{client: client, key: k, coll: client.Collection(collection), limits: store.Limits{MaxRowBytes: limit}}
	if err := d.probe(ctx); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// checkCollectionID applies Firestore's rules for collection IDs.
func checkCollectionID(id string) error {
	if strings.Contains(id, "/") || id == "." || id == ".." || len(id) > maxIDBytes || !utf8.ValidString(id) ||
		(len(id) >= 4 && strings.HasPrefix(id, "__") && strings.HasSuffix(id, "__")) {
		return fmt.Errorf("%w: collection %q is not a Firestore collection ID (one path segment of UTF-8, not . or .. or __*__, at most %d bytes)", store.ErrInvalid, id, maxIDBytes)
	}
	return nil
}

// probe reads a document that never exists (partition documents are never written), so that
// Open fails with a clear error on missing credentials or permissions, a missing database or an
// unreachable endpoint, rather than the first operation.
func (d *Driver) probe(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, probeTimeout)
		defer cancel()
	}
	_, err := d.read(ctx, d.coll.Doc(idPrefix))
	if err == nil {
		return nil
	}
	where := "firestore.googleapis.com"
	if d.key.emulator != "" {
		where = "the emulator at " + d.key.emulator
	}
	if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		return fmt.Errorf("%w: %s did not answer: %v", store.ErrUnavailable, where, err)
	}
	return fmt.Errorf("database %s of project %s on %s: %w", d.key.database, d.key.project, where, d.wrap(ctx, err))
}

// wrap maps Firestore errors onto the store sentinels.
func (d *Driver) wrap(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, store.ErrTooLarge) || errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrUnavailable) {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.Internal:
		return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	case codes.InvalidArgument, codes.NotFound:
		// A name Firestore rejects, or a database that does not exist.
		return fmt.Errorf("%w: %v", store.ErrInvalid, err)
	}
	return err
}

// ref returns the document of a row.
func (d *Driver) ref(key store.Key) (*firestore.DocumentRef, error) {
	p, err := encodeID(key.Partition)
	if err != nil {
		return nil, err
	}
	s, err := encodeID(key.Sort)
	if err != nil {
		return nil, err
	}
	return d.rows(d.coll.Doc(p)).Doc(s), nil
}

// row is what a conditional write needs to know of a row.
type row struct {
	attrs   store.Attrs
	exists  bool
	version time.Time // the document's update time, when it exists
	guessed bool      // not read but assumed absent
}

// read returns a row's current state.
func (d *Driver) read(ctx context.Context, ref *firestore.DocumentRef) (row, error) {
	snap, err := ref.Get(ctx)
	if snap == nil { // Get reports a missing document as NotFound with a snapshot, failures without
		return row{}, d.wrap(ctx, err)
	}
	return decodeRow(snap)
}

func decodeRow(snap *firestore.DocumentSnapshot) (row, error) {
	if !snap.Exists() {
		return row{}, nil
	}
	a, err := attrs(snap, nil)
	return row{attrs: a, exists: true, version: snap.UpdateTime}, err
}

// attrs decodes a row document, only the projected attributes when proj is not nil.
func attrs(snap *firestore.DocumentSnapshot, proj []store.Path) (store.Attrs, error) {
	v, err := snap.DataAt(blobField)
	blob, ok := v.([]byte)
	if err != nil || !ok {
		return nil, fmt.Errorf("document %s was not written by ssfkit: no %q bytes field", snap.Ref.Path, blobField)
	}
	a, err := store.DecodeProjected(blob, proj)
	if err != nil {
		return nil, fmt.Errorf("document %s: %w", snap.Ref.Path, err)
	}
	return a, nil
}

// Get implements store.Driver.
func (d *Driver) Get(ctx context.Context, key store.Key) (store.Attrs, bool, error) {
	ref, err := d.ref(key)
	if err != nil {
		return nil, false, err
	}
	r, err := d.read(ctx, ref)
	if err != nil {
		return nil, false, err
	}
	return r.attrs, r.exists, nil
}

// Update implements store.Driver.
func (d *Driver) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	rs, err := d.UpdateBatch(ctx, []store.BatchUpdate{{Key: key, Cond: cond, Update: upd}})
	if err != nil {
		return store.UpdateResult{}, err
	}
	return rs[0], nil
}

// UpdateBatch implements store.Batcher: one request reads the rows of the batch (those that
// updates want absent are not read at all), then each update is evaluated and written in
// order, exactly as Update would. It saves reads, not writes: Firestore commits several writes
// atomically only in a transaction, which costs more round trips and, under contention, waits
// for locks that time out.
func (d *Driver) UpdateBatch(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	refs := make([]*firestore.DocumentRef, len(ups))
	for i, u := range ups {
		if err := u.Update.Validate(); err != nil {
			return nil, err
		}
		ref, err := d.ref(u.Key)
		if err != nil {
			return nil, err
		}
		refs[i] = ref
	}
	// A row that an update wants absent is not read: Create finds out whether it is, so creating
	// a log entry or an intent takes one round trip.
	rows := make(map[string]row, len(ups)) // by document path: a batch may update a row twice
	var toRead []*firestore.DocumentRef
	for i, u := range ups {
		rows[refs[i].Path] = row{guessed: true}
		if !requiresAbsent(u.Cond) {
			toRead = append(toRead, refs[i])
		}
	}
	if len(toRead) > 0 {
		snaps, err := d.client.GetAll(ctx, toRead)
		if err != nil {
			return nil, d.wrap(ctx, err)
		}
		for i, snap := range snaps { // in the order of toRead
			if rows[toRead[i].Path], err = decodeRow(snap); err != nil {
				return nil, err
			}
		}
	}
	out := make([]store.UpdateResult, len(ups))
	for i, u := range ups {
		ref := refs[i]
		for cur := rows[ref.Path]; ; {
			res, next, done, err := d.apply(ctx, ref, u, cur)
			if done {
				if err != nil {
					return nil, err
				}
				out[i], rows[ref.Path] = res, next
				break
			}
			// The row was not read, or another writer changed it since: read it.
			fresh, rerr := d.read(ctx, ref)
			if rerr != nil {
				return nil, rerr
			}
			if refused(err, cur, fresh) {
				return nil, d.wrap(ctx, err)
			}
			cur = fresh
		}
	}
	return out, nil
}

// requiresAbsent reports whether c can hold only on a missing row.
func requiresAbsent(c store.Cond) bool {
	switch c.Op {
	case store.OpNot:
		return len(c.Args) == 1 && c.Args[0].Op == store.OpRowExists
	case store.OpAnd:
		return slices.ContainsFunc(c.Args, requiresAbsent)
	}
	return false
}

// apply evaluates u on the row as read and, when it applies, writes the new row on condition
// that the row is still as read. It returns the result and the row's new state, or done=false
// when the row must be read (again) first: it was guessed absent and the guess decides nothing
// (the update does not apply to an absent row), or the write failed its precondition (err).
func (d *Driver) apply(ctx context.Context, ref *firestore.DocumentRef, u store.BatchUpdate, cur row) (res store.UpdateResult, next row, done bool, err error) {
	res, blob, err := u.Evaluate(cur.attrs, cur.exists, d.limits.MaxRowBytes)
	if cur.guessed && (err != nil || !res.Applied) {
		return res, cur, false, nil
	}
	if err != nil || !res.Applied {
		return res, cur, true, err
	}
	token := make([]byte, 16)
	rand.Read(token)
	uncertain := new(atomic.Bool)
	wctx := context.WithValue(ctx, uncertainKey{}, uncertain)
	var wr *firestore.WriteResult
	if cur.exists {
		wr, err = ref.Update(wctx, []firestore.Update{{Path: blobField, Value: blob}, {Path: tokenField, Value: token}},
			firestore.LastUpdateTime(cur.version))
	} else {
		wr, err = ref.Create(wctx, map[string]any{blobField: blob, tokenField: token, sortField: ref.ID})
	}
	switch {
	case err == nil:
		return res, row{attrs: res.Attrs, exists: true, version: wr.UpdateTime}, true, nil
	case !conflict(err):
		return res, cur, true, d.wrap(ctx, err)
	case uncertain.Load():
		next, err := d.resolve(ctx, ref, token)
		return res, next, true, err
	}
	return res, cur, false, err
}

// conflict reports whether a write failed its precondition.
func conflict(err error) bool {
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.AlreadyExists, codes.NotFound:
		return true
	}
	return false
}

// refused reports whether a write conditioned on the row as it was (before) failed for some
// reason other than another writer: its update-time precondition failed, yet the row has that
// update time still. Retrying would only repeat the failure, forever.
func refused(err error, before, now row) bool {
	return status.Code(err) == codes.FailedPrecondition && before.exists && now.exists && now.version.Equal(before.version)
}

// resolve settles a write whose first attempt may have applied before the library's retry failed
// the precondition: the row carries the write's token if and only if it applied (and nothing
// overwrote it since). Otherwise the outcome is unknown, which ErrUnavailable says.
func (d *Driver) resolve(ctx context.Context, ref *firestore.DocumentRef, token []byte) (row, error) {
	snap, err := ref.Get(ctx)
	if err == nil {
		v, _ := snap.DataAt(tokenField)
		if mine, _ := v.([]byte); bytes.Equal(mine, token) {
			return decodeRow(snap)
		}
	} else if !conflict(err) {
		return row{}, d.wrap(ctx, err)
	}
	return row{}, fmt.Errorf("%w: a write to %s was retried after a lost response and the row has changed since; it may or may not have applied", store.ErrUnavailable, ref.Path)
}

// Scan implements store.Driver.
func (d *Driver) Scan(ctx context.Context, partition string, opts store.ScanOptions) ([]store.Row, error) {
	p, err := encodeID(partition)
	if err != nil {
		return nil, err
	}
	q := d.rows(d.coll.Doc(p)).Select(blobField)
	if opts.Reverse {
		q = q.OrderBy(sortField, firestore.Desc)
	} else {
		q = q.OrderBy(firestore.DocumentID, firestore.Asc)
	}
	if opts.Limit > 0 {
		q = q.Limit(opts.Limit)
	}
	it := q.Documents(ctx)
	defer it.Stop()
	out := []store.Row{}
	for {
		snap, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, d.wrap(ctx, err)
		}
		sk, err := decodeID(snap.Ref.ID)
		if err != nil {
			return nil, fmt.Errorf("partition %q: %w", partition, err)
		}
		a, err := attrs(snap, opts.Projection)
		if err != nil {
			return nil, err
		}
		out = append(out, store.Row{Key: store.Key{Partition: partition, Sort: sk}, Attrs: a})
	}
}

// Delete implements store.Driver.
func (d *Driver) Delete(ctx context.Context, key store.Key, cond store.Cond) (bool, error) {
	ref, err := d.ref(key)
	if err != nil {
		return false, err
	}
	// An unconditional delete needs no read: the Exists precondition reports a missing row.
	if cond.Op == store.OpTrue {
		err := d.delete(ctx, ref, firestore.Exists)
		if status.Code(err) == codes.NotFound {
			return false, nil
		}
		return err == nil, d.wrap(ctx, err)
	}
	var before row
	var failed error // the last attempt's failed precondition
	for {
		cur, err := d.read(ctx, ref)
		if err != nil {
			return false, err
		}
		if refused(failed, before, cur) {
			return false, d.wrap(ctx, failed)
		}
		if !cur.exists || !cond.Eval(cur.attrs, true) {
			return false, nil
		}
		failed = d.delete(ctx, ref, firestore.LastUpdateTime(cur.version))
		if !conflict(failed) {
			return failed == nil, d.wrap(ctx, failed)
		}
		before = cur // the row changed since the read: evaluate the condition again
	}
}

// delete deletes a document under a precondition. An attempt whose outcome is unknown is an
// error: a retry's failed precondition would not say whether the row was deleted.
func (d *Driver) delete(ctx context.Context, ref *firestore.DocumentRef, pre firestore.Precondition) error {
	uncertain := new(atomic.Bool)
	_, err := ref.Delete(context.WithValue(ctx, uncertainKey{}, uncertain), pre)
	if err != nil && uncertain.Load() {
		return fmt.Errorf("%w: a delete of %s was retried after a lost response; it may or may not have applied", store.ErrUnavailable, ref.Path)
	}
	return err
}

// Drop implements store.Dropper: it deletes every row of every partition, which is what a
// collection is (Firestore has no collection to delete; one exists while documents are in it).
func (d *Driver) Drop(ctx context.Context) error {
	bw := d.client.BulkWriter(ctx)
	var jobs []*firestore.BulkWriterJob
	err := forEach(d.coll.DocumentRefs(ctx), func(partition *firestore.DocumentRef) error {
		return forEach(d.rows(partition).DocumentRefs(ctx), func(row *firestore.DocumentRef) error {
			job, err := bw.Delete(row)
			if err == nil {
				jobs = append(jobs, job)
			}
			return err
		})
	})
	bw.End()
	for _, job := range jobs {
		if _, jerr := job.Results(); jerr != nil && err == nil {
			err = jerr
		}
	}
	return d.wrap(ctx, err)
}

// forEach calls fn with each document an iterator lists, including partition documents that
// do not exist but have rows.
func forEach(it *firestore.DocumentRefIterator, fn func(*firestore.DocumentRef) error) error {
	for {
		ref, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err == nil {
			err = fn(ref)
		}
		if err != nil {
			return err
		}
	}
}

// Limits implements store.Driver.
func (d *Driver) Limits() store.Limits { return d.limits }

// Close implements store.Driver; the shared client closes with its last driver.
func (d *Driver) Close() error {
	d.closed.Do(func() { releaseClient(d.key) })
	return nil
}
