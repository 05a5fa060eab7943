package txtest

import (
	"testing"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

func TestMain(m *testing.M) { testtables.Main(m) }

// Every point on mem://; every sixth on the slower stores keeps the default run short.

func TestTransactionsMemStore(t *testing.T) { Run(t, testtables.Mem, 1) }

func TestTransactionsSQLite(t *testing.T) { Run(t, testtables.SQLite(t), 6) }

func TestTransactionsPostgres(t *testing.T) { Run(t, testtables.Postgres, 6) }
