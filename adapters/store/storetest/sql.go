package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/suite"
)

// The tests of store.SQLTransactor: an application's statements and the table's rows in one
// transaction. Each test makes SQL tables of its own (random names: a relational backend's
// database outlives the harness's table) and drops them at the end.

func sqlTests() []struct {
	name string
	fn   func(suite.T, store.Driver)
} {
	return []struct {
		name string
		fn   func(suite.T, store.Driver)
	}{
		{"SQLCommitsWithRows", testSQLCommits},
		{"SQLRollsBackWithRows", testSQLRollsBack},
		{"SQLErrors", testSQLErrors},
		{"SQLReadOnly", testSQLReadOnly},
		{"ConcurrentSQL", testConcurrentSQL},
	}
}

// sqlTable creates a table (id text primary key, n integer) and returns its name.
func sqlTable(t suite.T, d store.Driver) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	tr := d.(store.SQLTransactor)
	if err := tr.TransactSQL(t.Context(), false, func(_ store.Driver, c store.SQLConn) error {
		_, err := c.Exec(t.Context(), `CREATE TABLE `+name+` (id text PRIMARY KEY, n integer NOT NULL)`)
		return err
	}); err != nil {
		t.Fatalf("CREATE TABLE: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background() // the test's context has ended
		if err := tr.TransactSQL(ctx, false, func(_ store.Driver, c store.SQLConn) error {
			_, err := c.Exec(ctx, `DROP TABLE `+name)
			return err
		}); err != nil {
			t.Errorf("DROP TABLE: %v", err)
		}
	})
	return name
}

// sqlCount returns the table's rows and the sum of n, read in a transaction of their own.
func sqlCount(t suite.T, d store.Driver, table string) (rows, sum int64) {
	t.Helper()
	if err := d.(store.SQLTransactor).TransactSQL(t.Context(), true, func(_ store.Driver, c store.SQLConn) error {
		return store.NewSQLTx(c).QueryRow(t.Context(), `SELECT count(*), coalesce(sum(n), 0) FROM `+table).Scan(&rows, &sum)
	}); err != nil {
		t.Fatalf("count: %v", err)
	}
	return rows, sum
}

// Statements with $N placeholders, a query of them, and the table's rows land together.
func testSQLCommits(t suite.T, d store.Driver) {
	h := h{t, d}
	table := sqlTable(t, d)
	err := d.(store.SQLTransactor).TransactSQL(t.Context(), false, func(kv store.Driver, c store.SQLConn) error {
		tx := store.NewSQLTx(c)
		for i, id := range []string{"a", "b", "c"} {
			if n, err := tx.Exec(t.Context(), `INSERT INTO `+table+` (id, n) VALUES ($1, $2)`, id, int64(i+1)); err != nil || n != 1 {
				return fmt.Errorf("insert %s: %d rows, %v", id, n, err)
			}
		}
		if n, err := tx.Exec(t.Context(), `UPDATE `+table+` SET n = n * 10 WHERE id <> $1`, "a"); err != nil || n != 2 {
			return fmt.Errorf("update: %d rows, %v", n, err)
		}
		rows, err := tx.Query(t.Context(), `SELECT id, n FROM `+table+` ORDER BY id`)
		if err != nil {
			return err
		}
		var got []string
		for rows.Next() {
			var id string
			var n int64
			if err := rows.Scan(&id, &n); err != nil {
				return err
			}
			got = append(got, fmt.Sprintf("%s=%d", id, n))
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if s := strings.Join(got, ","); s != "a=1,b=20,c=30" {
			return fmt.Errorf("the transaction reads %s, want its own writes a=1,b=20,c=30", s)
		}
		if r, err := kv.Update(t.Context(), key("log"), store.RowAbsent(), store.Update{store.SetAttr(store.Attr("v"), "logged")}); err != nil || !r.Applied {
			return fmt.Errorf("row: %+v, %v", r, err)
		}
		if a, found, err := kv.Get(t.Context(), key("log")); err != nil || !found || a["v"] != "logged" {
			return fmt.Errorf("read own row: %v %v %v", a, found, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("TransactSQL: %v", err)
	}
	if rows, sum := sqlCount(t, d, table); rows != 3 || sum != 51 {
		t.Errorf("after the commit: %d rows summing to %d, want 3 and 51", rows, sum)
	}
	h.expectRow(key("log"), store.Attrs{"v": "logged"})
}

// A function that fails leaves neither its statements nor its rows, and its error comes back.
func testSQLRollsBack(t suite.T, d store.Driver) {
	h := h{t, d}
	table := sqlTable(t, d)
	boom := errors.New("boom")
	err := d.(store.SQLTransactor).TransactSQL(t.Context(), false, func(kv store.Driver, c store.SQLConn) error {
		if _, err := c.Exec(t.Context(), `INSERT INTO `+table+` (id, n) VALUES ($1, $2)`, "x", int64(1)); err != nil {
			return err
		}
		if _, err := kv.Update(t.Context(), key("log"), store.RowAbsent(), store.Update{store.SetAttr(store.Attr("v"), "x")}); err != nil {
			return err
		}
		return fmt.Errorf("stop: %w", boom)
	})
	if !errors.Is(err, boom) {
		t.Fatalf("TransactSQL = %v, want the function's error", err)
	}
	if rows, _ := sqlCount(t, d, table); rows != 0 {
		t.Errorf("%d rows after a rollback", rows)
	}
	h.expectRow(key("log"), nil)
}

// A statement the database refuses is a *store.SQLError with the database's code; a missing
// row is store.ErrNoRows.
func testSQLErrors(t suite.T, d store.Driver) {
	table := sqlTable(t, d)
	var dup, syntax, none error
	// PostgreSQL aborts the transaction at the refused statement and its commit says so;
	// SQLite keeps it. Either way the statement's own error is what is checked.
	_ = d.(store.SQLTransactor).TransactSQL(t.Context(), false, func(_ store.Driver, c store.SQLConn) error {
		tx := store.NewSQLTx(c)
		var n int64
		none = tx.QueryRow(t.Context(), `SELECT n FROM `+table+` WHERE id = $1`, "nobody").Scan(&n)
		if _, err := tx.Exec(t.Context(), `INSERT INTO `+table+` (id, n) VALUES ($1, 1)`, "a"); err != nil {
			return err
		}
		_, dup = tx.Exec(t.Context(), `INSERT INTO `+table+` (id, n) VALUES ($1, 2)`, "a")
		return nil
	})
	_ = d.(store.SQLTransactor).TransactSQL(t.Context(), false, func(_ store.Driver, c store.SQLConn) error {
		_, syntax = c.Exec(t.Context(), `INSERT INTO nowhere VALUES`)
		return syntax
	})
	if !errors.Is(none, store.ErrNoRows) {
		t.Errorf("QueryRow of no row: %v, want store.ErrNoRows", none)
	}
	for what, e := range map[string]error{"a duplicate key": dup, "a syntax error": syntax} {
		var se *store.SQLError
		if !errors.As(e, &se) || se.Code == "" || se.Message == "" {
			t.Errorf("%s: %v (%T), want a *store.SQLError with a code and a message", what, e, e)
		} else if errors.Is(e, store.ErrUnavailable) {
			t.Errorf("%s: %v is a refusal, not an unavailable store", what, e)
		}
	}
	var se *store.SQLError
	if errors.As(dup, &se) && se.Code != "23505" && se.Code != "SQLITE_CONSTRAINT_PRIMARYKEY" && se.Code != "SQLITE_CONSTRAINT_UNIQUE" {
		t.Errorf("a duplicate key's code is %q, want the database's unique-violation code", se.Code)
	}
}

// A read-only transaction reads, and the database refuses its writes, statements and rows alike.
func testSQLReadOnly(t suite.T, d store.Driver) {
	h := h{t, d}
	table := sqlTable(t, d)
	h.put(key("r"), store.Attrs{"v": "x"})
	var write, rowWrite error
	// PostgreSQL's commit reports the aborted transaction; what matters is what landed.
	_ = d.(store.SQLTransactor).TransactSQL(t.Context(), true, func(kv store.Driver, c store.SQLConn) error {
		if a, found, err := kv.Get(t.Context(), key("r")); err != nil || !found || a["v"] != "x" {
			return fmt.Errorf("read a row: %v %v %v", a, found, err)
		}
		_, write = c.Exec(t.Context(), `INSERT INTO `+table+` (id, n) VALUES ($1, 1)`, "a")
		return nil
	})
	_ = d.(store.SQLTransactor).TransactSQL(t.Context(), true, func(kv store.Driver, _ store.SQLConn) error {
		_, rowWrite = kv.Update(t.Context(), key("w"), store.RowAbsent(), store.Update{store.SetAttr(store.Attr("v"), "y")})
		return rowWrite
	})
	var se *store.SQLError
	if !errors.As(write, &se) {
		t.Errorf("an INSERT in a read-only transaction: %v, want a *store.SQLError", write)
	}
	if rowWrite == nil {
		t.Errorf("a row written in a read-only transaction was accepted")
	}
	if rows, _ := sqlCount(t, d, table); rows != 0 {
		t.Errorf("a read-only transaction inserted %d rows", rows)
	}
	h.expectRow(key("w"), nil)
	// The connection is writable again afterwards.
	h.put(key("after"), store.Attrs{"v": "z"})
}

// Concurrent transactions incrementing one SQL row, each creating a row of its own, lose no
// increment and no row.
func testConcurrentSQL(t suite.T, d store.Driver) {
	table := sqlTable(t, d)
	tr := d.(store.SQLTransactor)
	if err := tr.TransactSQL(t.Context(), false, func(_ store.Driver, c store.SQLConn) error {
		_, err := c.Exec(t.Context(), `INSERT INTO `+table+` (id, n) VALUES ('c', 0)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const workers, each = 4, 10
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				err := tr.TransactSQL(t.Context(), false, func(kv store.Driver, c store.SQLConn) error {
					if _, err := c.Exec(t.Context(), `UPDATE `+table+` SET n = n + 1 WHERE id = 'c'`); err != nil {
						return err
					}
					r, err := kv.Update(t.Context(), key(fmt.Sprintf("w%d-%d", w, i)), store.RowAbsent(), store.Update{store.SetAttr(store.Attr("v"), int64(i))})
					if err == nil && !r.Applied {
						err = errors.New("a fresh row already existed")
					}
					return err
				})
				if err != nil {
					t.Errorf("TransactSQL: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if _, sum := sqlCount(t, d, table); sum != workers*each {
		t.Errorf("counter = %d, want %d", sum, workers*each)
	}
	h := h{t, d}
	if rows := h.scan(key("").Partition); len(rows) != workers*each {
		t.Errorf("%d rows, want %d", len(rows), workers*each)
	}
}
