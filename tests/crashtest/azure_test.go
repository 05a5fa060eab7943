package crashtest

import (
	"testing"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

// Every 24th point and two schedules: Azurite round trips cost milliseconds, not microseconds.
func TestCrashInjectionAzureTables(t *testing.T) {
	t.Parallel()
	Run(t, testtables.AzureTables, Options{Stride: 24, Schedules: 2})
}
