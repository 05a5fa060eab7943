// Command ssfkit is the one CLI of ssfkit: run the demo, a local development environment, and
// benchmarks.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ssfkit:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	return fmt.Errorf("not yet")
}
