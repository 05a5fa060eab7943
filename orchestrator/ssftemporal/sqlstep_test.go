package ssftemporal

import (
	"context"
	"testing"

	"go.temporal.io/sdk/workflow"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/faults"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// ledgerFixture is an SSF whose activity is a SQL step on SQLite: it appends its input to a
// table without a unique key (a repeated effect shows as a second row) and returns the sum.
func ledgerFixture(t *testing.T, inj ssf.FaultInjector) (*fixture, store.SQLTransactor) {
	table := testtables.SQLite(t)(t, "ledger")
	tr := table.Driver().(store.SQLTransactor)
	ctx := context.Background()
	if err := tr.TransactSQL(ctx, false, func(_ store.Driver, c store.SQLConn) error {
		_, err := c.Exec(ctx, `CREATE TABLE entries (amount integer NOT NULL)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{host: local.NewHost(), rts: map[string]*ssf.Runtime{}}
	f.host.Logger = quiet
	rt, err := f.host.Add(ssf.Config{Name: "ledger", Store: table, Logger: quiet, Faults: inj,
		Hold: func(context.Context, string) (bool, error) { return true, nil },
		Handler: ssf.Typed(func(env *ssf.Env, amount int64) (int64, error) {
			return ssf.RunSQL(env, func(ctx context.Context, tx *store.SQLTx) (int64, error) {
				if _, err := tx.Exec(ctx, `INSERT INTO entries (amount) VALUES ($1)`, amount); err != nil {
					return 0, err
				}
				var sum int64
				err := tx.QueryRow(ctx, `SELECT sum(amount) FROM entries`).Scan(&sum)
				return sum, err
			})
		})})
	if err != nil {
		t.Fatal(err)
	}
	f.rts["ledger"] = rt
	t.Cleanup(f.host.Close)
	return f, tr
}

func appendThree(ctx workflow.Context) (int64, error) {
	var sum int64
	for amount := 1; amount <= 3; amount++ {
		if err := Call(ctx, "ledger", amount, &sum); err != nil {
			return 0, err
		}
	}
	return sum, nil
}

// SQL steps compose with Temporal: a worker that dies at any point of an activity whose step is
// SQL makes Temporal retry it, and the retry replays the logged step instead of inserting again.
func TestSQLStepActivityRetriesAreExactlyOnce(t *testing.T) {
	count := faults.At(0)
	clean, _ := ledgerFixture(t, count)
	count.Enable(true)
	env := clean.env(t)
	env.ExecuteWorkflow(appendThree)
	var sum int64
	if err := env.GetWorkflowResult(&sum); err != nil || sum != 6 {
		t.Fatalf("clean run: %d, %v", sum, err)
	}
	points := count.Points()
	for k := 1; k <= points; k++ {
		inj := faults.At(k)
		f, tr := ledgerFixture(t, inj)
		inj.Enable(true)
		env := f.env(t)
		env.ExecuteWorkflow(appendThree)
		var sum int64
		if err := env.GetWorkflowResult(&sum); err != nil {
			t.Fatalf("crash at point %d (%v): %v", k, inj.Crashes(), err)
		}
		var rows, total int64
		ctx := context.Background()
		if err := tr.TransactSQL(ctx, true, func(_ store.Driver, c store.SQLConn) error {
			return store.NewSQLTx(c).QueryRow(ctx, `SELECT count(*), sum(amount) FROM entries`).Scan(&rows, &total)
		}); err != nil {
			t.Fatal(err)
		}
		if sum != 6 || rows != 3 || total != 6 || len(inj.Crashes()) != 1 {
			t.Fatalf("crash at point %d (%v): the workflow returned %d; the table holds %d rows summing to %d, want 3 summing to 6", k, inj.Crashes(), sum, rows, total)
		}
	}
	t.Logf("crashed once at each of %d points: every run equals the clean one", points)
}
