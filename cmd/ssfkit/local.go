package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/sqlitestore"
	"github.com/ssfkit/ssfkit/internal/deploy"
)

// dropLocalTables drops the tables of a local config's SSFs from their SQLite databases, and
// removes a database (with its WAL files) only when no table is left in it: the tables of
// other examples in the same .ssfkit/dev.db survive.
func dropLocalTables(ctx context.Context, cfg *deploy.Config, stdout io.Writer) error {
	byFile := map[string]map[string]string{} // database file -> the SSFs' tables in it -> store URL
	for _, s := range cfg.SSFs {
		u, err := store.ParseURL(s.Store)
		if err != nil || u.Scheme != "sqlite" {
			continue
		}
		if byFile[u.Path] == nil {
			byFile[u.Path] = map[string]string{}
		}
		byFile[u.Path][u.Param("table", sqlitestore.DefaultTable)] = s.Store
	}
	for _, file := range slices.Sorted(maps.Keys(byFile)) {
		if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(stdout, "down: %s does not exist\n", file)
			continue
		}
		dropped := slices.Sorted(maps.Keys(byFile[file]))
		for _, table := range dropped {
			if err := dropTable(ctx, byFile[file][table]); err != nil {
				return fmt.Errorf("down: %w", err)
			}
		}
		left, err := sqliteTables(ctx, file)
		if err != nil {
			return fmt.Errorf("down: %s: %w", file, err)
		}
		if len(left) > 0 {
			fmt.Fprintf(stdout, "down: dropped tables %s from %s; kept the file for its other tables (%s)\n",
				strings.Join(dropped, ", "), file, strings.Join(left, ", "))
			continue
		}
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(file + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("down: %w", err)
			}
		}
		fmt.Fprintf(stdout, "down: dropped tables %s; removed %s (no table left)\n", strings.Join(dropped, ", "), file)
	}
	return nil
}

// dropTable drops the table at the store URL.
func dropTable(ctx context.Context, storeURL string) error {
	tbl, err := store.Open(ctx, storeURL)
	if err != nil {
		return err
	}
	defer tbl.Close()
	dr, ok := tbl.Driver().(store.Dropper)
	if !ok {
		return fmt.Errorf("the driver of %s cannot drop tables", tbl.Name())
	}
	if err := dr.Drop(ctx); err != nil {
		return fmt.Errorf("drop %s: %w", tbl.Name(), err)
	}
	return nil
}

// sqliteTables lists the tables of the SQLite file.
func sqliteTables(ctx context.Context, file string) ([]string, error) {
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: file}).String()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, rows.Err()
}
