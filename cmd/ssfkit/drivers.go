package main

// Every driver is linked in, so any URL works with every command (dev, bench, conformance);
// TestEveryBackendIsLinkedIn keeps this list whole: every driver
// package, and every backend of the test matrices (internal/testtables, adapters/queue/queuetest).
import (
	_ "github.com/ssfkit/ssfkit/adapters/provenance/blobsink"
	_ "github.com/ssfkit/ssfkit/adapters/provenance/sqlitesink"
	_ "github.com/ssfkit/ssfkit/adapters/queue/azurequeue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/logqueue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/memqueue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/pubsubqueue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/sqsqueue"
	_ "github.com/ssfkit/ssfkit/adapters/store/aztablestore"
	_ "github.com/ssfkit/ssfkit/adapters/store/bigtablestore"
	_ "github.com/ssfkit/ssfkit/adapters/store/dynamostore"
	_ "github.com/ssfkit/ssfkit/adapters/store/firestorestore"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	_ "github.com/ssfkit/ssfkit/adapters/store/pgstore"
	_ "github.com/ssfkit/ssfkit/adapters/store/sqlitestore"
)
