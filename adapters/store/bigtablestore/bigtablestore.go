// Package bigtablestore is the Google Cloud Bigtable store driver (cloud.google.com/go/bigtable).
//
// URL: bigtable://PROJECT/INSTANCE/TABLE with the query parameters
//
//   - app_profile=ID: the app profile for data requests (default: the instance's "default"
//     profile). It must use single-cluster routing and allow single-row transactions: with
//     multi-cluster routing Bigtable is only eventually consistent, and ssfkit needs every read to
//     see every acknowledged write. The driver checks this at open (see check_routing).
//   - check_routing=false: skip that check, for credentials that may not read app profiles.
//   - create=true: create the table and its column family if missing (needs
//     roles/bigtable.admin); without it a missing table is an error.
//   - emulator=HOST:PORT: talk to a Bigtable emulator without credentials. It takes precedence
//     over the BIGTABLE_EMULATOR_HOST environment variable, which the client library honours when
//     the URL names no emulator.
//   - max_row_bytes=N: the row size limit (default 400 KiB, DynamoDB's item limit).
//
// Credentials are Application Default Credentials. Layout: one Bigtable row per store row, keyed
// by the escaped partition, a terminator and the sort key (see rowKey); column family "d" holds
// the attributes encoded with store.EncodeAttrs in column "a" and a random version token in
// column "v". A conditional update reads the row, evaluates the condition with the portable
// evaluator, and writes with CheckAndMutateRow only if the version is still the one it read (or,
// for a new row, only if the row still does not exist), starting over otherwise. A write
// replaces the whole family, so each column holds exactly one cell.
package bigtablestore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"cloud.google.com/go/bigtable"
	"cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ssfkit/ssfkit/adapters/store"
)

func init() { store.Register("bigtable", open) }

const (
	// DefaultMaxRowBytes matches DynamoDB's item limit, so a value that fits here fits there.
	DefaultMaxRowBytes = store.PortableMaxRowBytes
	// maxCellBytes is Bigtable's hard limit on one cell value; the attributes are one cell.
	maxCellBytes = 100 << 20
	// maxKeyBytes is Bigtable's row key limit.
	maxKeyBytes = 4096

	family  = "d"
	colAttr = "a"
	colVer  = "v"
)

// Column and value filters are ranges rather than regular expressions: they match exact
// qualifiers and values whatever the server's regex dialect.
var (
	familyCells = bigtable.ColumnRangeFilter(family, "", "")
	attrCells   = bigtable.ColumnRangeFilter(family, colAttr, colAttr+"\x00")
	verCells    = bigtable.ColumnRangeFilter(family, colVer, colVer+"\x00")
)

// versionIs matches the row when its version cell holds exactly v.
func versionIs(v string) bigtable.Filter {
	return bigtable.ChainFilters(verCells, bigtable.ValueRangeFilter([]byte(v), []byte(v+"\x00")))
}

// Driver is a store.Driver over one Bigtable table.
type Driver struct {
	c      *client
	ck     clientKey
	table  string
	tbl    *bigtable.Table
	limits store.Limits
	closed sync.Once
}

// clientKey identifies a shared client: an application opens a table per SSF, and a client
// each would multiply connection pools.
type clientKey struct {
	project, instance, profile string
	emulator                   string // the effective emulator address, from the URL or the environment
}

type client struct {
	data           *bigtable.Client
	admin          *bigtable.AdminClient
	routingChecked bool
	refs           int
}

var (
	clientsMu sync.Mutex
	clients   = map[clientKey]*client{}
)

var (
	// Bigtable's resource ID rules: project 6-30 lowercase letters, digits, hyphens; instance
	// 6-33; table and app profile up to 50 letters, digits, '_', '-', '.'.
	projectID  = regexp.MustCompile(`^[a-z][-a-z0-9]{4,28}[a-z0-9]$`)
	instanceID = regexp.MustCompile(`^[a-z][-a-z0-9]{4,31}[a-z0-9]$`)
	tableID    = regexp.MustCompile(`^[_a-zA-Z0-9][-_.a-zA-Z0-9]{0,49}$`)
)

type config struct {
	key          clientKey
	dialEmulator bool // the URL names the emulator, so the driver dials it
	table        string
	create       bool
	checkRouting bool
	limits       store.Limits
}

func parseConfig(u *store.URL) (config, error) {
	if err := u.CheckParams("app_profile", "check_routing", "create", "emulator", "max_row_bytes"); err != nil {
		return config{}, err
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if len(parts) != 2 {
		return config{}, fmt.Errorf("%w: want bigtable://PROJECT/INSTANCE/TABLE, got path %q", store.ErrInvalid, u.Path)
	}
	c := config{
		key:          clientKey{project: u.Host, instance: parts[0], profile: u.Param("app_profile", "")},
		table:        parts[1],
		checkRouting: true,
		limits:       store.Limits{MaxRowBytes: DefaultMaxRowBytes},
	}
	switch {
	case !projectID.MatchString(c.key.project):
		return config{}, fmt.Errorf("%w: project %q is not a Bigtable project ID (6-30 lowercase letters, digits, hyphens)", store.ErrInvalid, c.key.project)
	case !instanceID.MatchString(c.key.instance):
		return config{}, fmt.Errorf("%w: instance %q is not a Bigtable instance ID (6-33 lowercase letters, digits, hyphens)", store.ErrInvalid, c.key.instance)
	case !tableID.MatchString(c.table):
		return config{}, fmt.Errorf("%w: table %q is not a Bigtable table ID (1-50 letters, digits, '_', '-', '.')", store.ErrInvalid, c.table)
	case c.key.profile != "" && !tableID.MatchString(c.key.profile):
		return config{}, fmt.Errorf("%w: app_profile=%q is not a Bigtable app profile ID", store.ErrInvalid, c.key.profile)
	}
	for name, dst := range map[string]*bool{"create": &c.create, "check_routing": &c.checkRouting} {
		if s := u.Query.Get(name); s != "" {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return config{}, fmt.Errorf("%w: %s=%q must be true or false", store.ErrInvalid, name, s)
			}
			*dst = b
		}
	}
	if s := u.Query.Get("max_row_bytes"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 256 || n > maxCellBytes {
			return config{}, fmt.Errorf("%w: max_row_bytes=%q must be an integer from 256 to %d (Bigtable's cell limit)", store.ErrInvalid, s, maxCellBytes)
		}
		c.limits.MaxRowBytes = n
	}
	if e := u.Query.Get("emulator"); e != "" {
		if _, port, err := net.SplitHostPort(e); err != nil || port == "" {
			return config{}, fmt.Errorf("%w: emulator=%q must be HOST:PORT", store.ErrInvalid, e)
		}
		c.key.emulator, c.dialEmulator = e, true
	} else {
		c.key.emulator = os.Getenv("BIGTABLE_EMULATOR_HOST")
	}
	return c, nil
}

func open(ctx context.Context, u *store.URL) (store.Driver, error) {
	cfg, err := parseConfig(u)
	if err != nil {
		return nil, err
	}
	c, err := acquireClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	d := &Driver{c: c, ck: cfg.key, table: cfg.table, tbl: c.data.Open(cfg.table), limits: cfg.limits}
	// Reads and admin calls retry an unreachable server until the context ends; a ping, which is
	// not retried, makes an unreachable backend fail the open at once.
	err = c.data.PingAndWarm(ctx)
	if err == nil {
		err = ensureTable(ctx, c.admin, cfg)
	}
	if err != nil {
		d.Close()
		return nil, wrap(ctx, err)
	}
	return d, nil
}

func acquireClient(ctx context.Context, cfg config) (*client, error) {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	c, ok := clients[cfg.key]
	if !ok {
		var err error
		if c, err = newClient(ctx, cfg); err != nil {
			return nil, err
		}
		clients[cfg.key] = c
	}
	c.refs++
	if cfg.checkRouting && !c.routingChecked && cfg.key.emulator == "" {
		if err := checkRouting(ctx, cfg.key); err != nil {
			releaseLocked(cfg.key)
			return nil, err
		}
		c.routingChecked = true
	}
	return c, nil
}

func releaseClient(k clientKey) {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	releaseLocked(k)
}

func releaseLocked(k clientKey) {
	if c, ok := clients[k]; ok {
		if c.refs--; c.refs == 0 {
			c.data.Close()
			c.admin.Close()
			delete(clients, k)
		}
	}
}

func newClient(ctx context.Context, cfg config) (*client, error) {
	k := cfg.key
	conf := bigtable.ClientConfig{AppProfile: k.profile}
	if k.emulator != "" {
		conf.MetricsProvider = bigtable.NoopMetricsProvider{} // an emulator has no Cloud Monitoring
	}
	opts, conn, err := clientOptions(cfg)
	if err != nil {
		return nil, err
	}
	data, err := bigtable.NewClientWithConfig(ctx, k.project, k.instance, conf, opts...)
	if err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("bigtable client for projects/%s/instances/%s: %w", k.project, k.instance, err)
	}
	if opts, conn, err = clientOptions(cfg); err != nil {
		data.Close()
		return nil, err
	}
	admin, err := bigtable.NewAdminClient(ctx, k.project, k.instance, opts...)
	if err != nil {
		closeConn(conn)
		data.Close()
		return nil, fmt.Errorf("bigtable admin client for projects/%s/instances/%s: %w", k.project, k.instance, err)
	}
	return &client{data: data, admin: admin}, nil
}

// clientOptions dials the URL's emulator, a connection per client because a client closes the
// connection it is given. Without one, the library uses Application Default Credentials, or
// BIGTABLE_EMULATOR_HOST when set.
func clientOptions(cfg config) ([]option.ClientOption, *grpc.ClientConn, error) {
	if !cfg.dialEmulator {
		return nil, nil, nil
	}
	conn, err := grpc.NewClient("passthrough:///"+cfg.key.emulator,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// The library raises gRPC's 4 MiB default the same way for the connections it dials.
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(1<<28), grpc.MaxCallRecvMsgSize(1<<28)))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: emulator=%q: %v", store.ErrInvalid, cfg.key.emulator, err)
	}
	return []option.ClientOption{option.WithGRPCConn(conn)}, conn, nil
}

// closeConn closes a connection clientOptions dialed that no client took over.
func closeConn(conn *grpc.ClientConn) {
	if conn != nil {
		conn.Close()
	}
}

// checkRouting fails unless the app profile routes to a single cluster with single-row
// transactions allowed: the only configuration in which Bigtable is strongly consistent and
// accepts CheckAndMutateRow.
func checkRouting(ctx context.Context, k clientKey) error {
	iac, err := bigtable.NewInstanceAdminClient(ctx, k.project)
	if err != nil {
		return fmt.Errorf("bigtable instance admin client for projects/%s: %w", k.project, err)
	}
	defer iac.Close()
	name := k.profile
	if name == "" {
		name = "default"
	}
	p, err := iac.GetAppProfile(ctx, k.instance, name)
	if status.Code(err) == codes.PermissionDenied {
		return fmt.Errorf("cannot read app profile %q to check it uses single-cluster routing: %v (grant bigtable.appProfiles.get, e.g. with roles/bigtable.user, or, having checked the profile, add check_routing=false)", name, err)
	}
	if err != nil {
		return wrap(ctx, fmt.Errorf("app profile %q: %w", name, err))
	}
	return routingError(p)
}

func routingError(p *adminpb.AppProfile) error {
	sc := p.GetSingleClusterRouting()
	if sc == nil {
		return fmt.Errorf("%w: app profile %s does not use single-cluster routing, so Bigtable is only eventually consistent through it; use a profile with single-cluster routing and single-row transactions", store.ErrInvalid, p.GetName())
	}
	if !sc.GetAllowTransactionalWrites() {
		return fmt.Errorf("%w: app profile %s does not allow single-row transactions (CheckAndMutateRow), which every conditional update uses", store.ErrInvalid, p.GetName())
	}
	return nil
}

// ensureTable checks that the table and its column family exist, creating them with create.
func ensureTable(ctx context.Context, admin *bigtable.AdminClient, cfg config) error {
	where := fmt.Sprintf("table %q in projects/%s/instances/%s", cfg.table, cfg.key.project, cfg.key.instance)
	fam := bigtable.Family{GCPolicy: bigtable.MaxVersionsPolicy(1)}
	info, err := admin.TableInfo(ctx, cfg.table)
	switch {
	case status.Code(err) == codes.NotFound && cfg.create:
		err = admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: cfg.table, ColumnFamilies: map[string]bigtable.Family{family: fam}})
		switch status.Code(err) {
		case codes.OK:
			return nil
		case codes.AlreadyExists:
			return ensureTable(ctx, admin, cfg) // another process created it first
		}
		return fmt.Errorf("create %s (create=true needs roles/bigtable.admin): %w", where, err)
	case status.Code(err) == codes.NotFound:
		return fmt.Errorf("%s does not exist: create it with column family %q (see docs/stores/bigtable.md) or add create=true to the URL", where, family)
	case err != nil:
		return fmt.Errorf("%s: %w", where, err)
	}
	for _, f := range info.FamilyInfos {
		if f.Name == family {
			return nil
		}
	}
	if !cfg.create {
		return fmt.Errorf("%s has no column family %q: add it (see docs/stores/bigtable.md) or add create=true to the URL", where, family)
	}
	err = admin.CreateColumnFamilyWithConfig(ctx, cfg.table, family, fam)
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("add column family %q to %s (create=true needs roles/bigtable.admin): %w", family, where, err)
	}
	return nil
}

// wrap maps gRPC failures onto the store's sentinel errors.
func wrap(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, store.ErrTooLarge) || errors.Is(err, store.ErrInvalid) {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.Internal:
		// Transient: the server could not be reached, was overloaded or failed mid-request; a
		// write may or may not have applied.
		return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	case codes.InvalidArgument, codes.OutOfRange:
		return fmt.Errorf("%w: %v", store.ErrInvalid, err)
	case codes.FailedPrecondition:
		return fmt.Errorf("%w (for CheckAndMutateRow: does the app profile allow single-row transactions?)", err)
	}
	return err
}

// partitionPrefix is the row key prefix of a partition: the partition with each 0x00 escaped as
// 00 FF, then the terminator 00 01. The first 00 not followed by FF ends the partition, so no
// partition's prefix is a prefix of another's; and since the terminator sorts below both an
// escaped 00 and any other byte, row keys sort as (partition, sort key) pairs do.
func partitionPrefix(partition string) string {
	var b strings.Builder
	b.Grow(len(partition) + 2)
	for i := 0; i < len(partition); i++ {
		if partition[i] == 0 {
			b.WriteString("\x00\xff")
		} else {
			b.WriteByte(partition[i])
		}
	}
	b.WriteString("\x00\x01")
	return b.String()
}

// rowKey is the Bigtable row key of a store row: the partition's prefix, then the sort key, so a
// partition is one contiguous row range ordered by sort key.
func rowKey(k store.Key) (string, error) {
	rk := partitionPrefix(k.Partition) + k.Sort
	if len(rk) > maxKeyBytes {
		return "", fmt.Errorf("%w: row %s: key is %d bytes encoded, Bigtable's limit is %d", store.ErrInvalid, k, len(rk), maxKeyBytes)
	}
	return rk, nil
}

// row is a store row as read: its attributes and version token.
type row struct {
	attrs   store.Attrs
	version string
}

// decodeRow extracts the attributes (projected to proj) and version from a row's cells.
func decodeRow(key store.Key, r bigtable.Row, proj []store.Path) (row, error) {
	var out row
	var blob []byte
	found := false
	for _, it := range r[family] {
		switch it.Column {
		case family + ":" + colAttr:
			blob, found = it.Value, true
		case family + ":" + colVer:
			out.version = string(it.Value)
		}
	}
	if !found {
		return row{}, fmt.Errorf("row %s: no attribute cell %s:%s (row not written by ssfkit?)", key, family, colAttr)
	}
	a, err := store.DecodeProjected(blob, proj)
	if err != nil {
		return row{}, fmt.Errorf("row %s: %w", key, err)
	}
	out.attrs = a
	return out, nil
}

func (d *Driver) read(ctx context.Context, key store.Key, rk string) (row, bool, error) {
	r, err := d.tbl.ReadRow(ctx, rk, bigtable.RowFilter(familyCells))
	if err != nil || len(r) == 0 {
		return row{}, false, err
	}
	cur, err := decodeRow(key, r, nil)
	if err == nil && cur.version == "" {
		err = fmt.Errorf("row %s: no version cell %s:%s (row not written by ssfkit?)", key, family, colVer)
	}
	return cur, err == nil, err
}

// Get implements store.Driver.
func (d *Driver) Get(ctx context.Context, key store.Key) (store.Attrs, bool, error) {
	rk, err := rowKey(key)
	if err != nil {
		return nil, false, err
	}
	cur, found, err := d.read(ctx, key, rk)
	return cur.attrs, found, wrap(ctx, err)
}

// Update implements store.Driver.
func (d *Driver) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	if err := upd.Validate(); err != nil {
		return store.UpdateResult{}, err
	}
	rk, err := rowKey(key)
	if err != nil {
		return store.UpdateResult{}, err
	}
	u := store.BatchUpdate{Key: key, Cond: cond, Update: upd}
	// A condition only a missing row satisfies (creating intents and log entries) is first tried
	// as a create, without reading: one round trip instead of two when the row is absent, as it
	// usually is. If the row exists after all, the update starts over with a read.
	guessAbsent := cond.Eval(nil, false) && !cond.Eval(store.Attrs{}, true)
	for {
		var cur row
		exists := false
		if !guessAbsent {
			if cur, exists, err = d.read(ctx, key, rk); err != nil {
				return store.UpdateResult{}, wrap(ctx, err)
			}
		}
		res, blob, err := u.Evaluate(cur.attrs, exists, d.limits.MaxRowBytes)
		if guessAbsent && err != nil {
			guessAbsent = false // the error may not hold for the row as it is
			continue
		}
		if err != nil || !res.Applied {
			return res, err
		}
		// The family is replaced as a whole, leaving one cell per column. (Deleting column by
		// column would do too, but races in bttest, which shares a row's column list with readers.)
		m := bigtable.NewMutation()
		m.DeleteCellsInFamily(family)
		m.Set(family, colAttr, bigtable.ServerTime, blob)
		m.Set(family, colVer, bigtable.ServerTime, []byte(rand.Text()))
		// Write only if the row is still as read: same version, or still absent.
		cm := bigtable.NewCondMutation(familyCells, nil, m)
		if exists {
			cm = bigtable.NewCondMutation(versionIs(cur.version), m, nil)
		}
		var matched bool
		if err := d.tbl.Apply(ctx, rk, cm, bigtable.GetCondMutationResult(&matched)); err != nil {
			return store.UpdateResult{}, wrap(ctx, err)
		}
		if matched == exists {
			return res, nil
		}
		guessAbsent = false
	}
}

// Scan implements store.Driver.
func (d *Driver) Scan(ctx context.Context, partition string, opts store.ScanOptions) ([]store.Row, error) {
	prefix := partitionPrefix(partition)
	if len(prefix) > maxKeyBytes {
		return nil, fmt.Errorf("%w: partition %q: prefix is %d bytes encoded, Bigtable's key limit is %d", store.ErrInvalid, partition, len(prefix), maxKeyBytes)
	}
	ro := []bigtable.ReadOption{bigtable.RowFilter(attrCells)}
	if opts.Limit > 0 {
		ro = append(ro, bigtable.LimitRows(int64(opts.Limit)))
	}
	if opts.Reverse {
		ro = append(ro, bigtable.ReverseScan())
	}
	out := []store.Row{}
	var decodeErr error
	err := d.tbl.ReadRows(ctx, bigtable.PrefixRange(prefix), func(r bigtable.Row) bool {
		key := store.Key{Partition: partition, Sort: strings.TrimPrefix(r.Key(), prefix)}
		var cur row
		if cur, decodeErr = decodeRow(key, r, opts.Projection); decodeErr != nil {
			return false
		}
		out = append(out, store.Row{Key: key, Attrs: cur.attrs})
		return true
	}, ro...)
	if err != nil {
		return nil, wrap(ctx, err)
	}
	if decodeErr != nil {
		return nil, decodeErr
	}
	return out, nil
}

// Delete implements store.Driver.
func (d *Driver) Delete(ctx context.Context, key store.Key, cond store.Cond) (bool, error) {
	rk, err := rowKey(key)
	if err != nil {
		return false, err
	}
	del := bigtable.NewMutation()
	del.DeleteRow()
	var matched bool
	if !usesAttrs(cond) {
		// The condition depends on existence alone (index entries and logs are deleted
		// unconditionally): one round trip that deletes the row if it exists.
		if !cond.Eval(nil, true) {
			return false, nil
		}
		err := d.tbl.Apply(ctx, rk, bigtable.NewCondMutation(familyCells, del, nil), bigtable.GetCondMutationResult(&matched))
		return matched, wrap(ctx, err)
	}
	for {
		cur, exists, err := d.read(ctx, key, rk)
		if err != nil || !exists || !cond.Eval(cur.attrs, exists) {
			return false, wrap(ctx, err)
		}
		if err := d.tbl.Apply(ctx, rk, bigtable.NewCondMutation(versionIs(cur.version), del, nil), bigtable.GetCondMutationResult(&matched)); err != nil {
			return false, wrap(ctx, err)
		}
		if matched {
			return true, nil
		}
	}
}

// usesAttrs reports whether c looks at attributes, not only at whether the row exists.
func usesAttrs(c store.Cond) bool {
	switch c.Op {
	case store.OpTrue, store.OpFalse, store.OpRowExists:
		return false
	case store.OpAnd, store.OpOr, store.OpNot:
		for _, a := range c.Args {
			if usesAttrs(a) {
				return true
			}
		}
		return false
	}
	return true
}

// Limits implements store.Driver.
func (d *Driver) Limits() store.Limits { return d.limits }

// Drop implements store.Dropper: it deletes the table (which needs roles/bigtable.admin).
func (d *Driver) Drop(ctx context.Context) error {
	if err := d.c.admin.DeleteTable(ctx, d.table); status.Code(err) != codes.NotFound {
		return wrap(ctx, err)
	}
	return nil
}

// Close implements store.Driver; the shared client closes with its last driver.
func (d *Driver) Close() error {
	d.closed.Do(func() { releaseClient(d.ck) })
	return nil
}
