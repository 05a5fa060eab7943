package testtables

import (
	"fmt"

	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/firestorestore"
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testservers"
)

// FirestoreURL is the URL of a collection on the Firestore emulator testservers starts once per
// test binary.
func FirestoreURL(t suite.T, collection string) string {
	return fmt.Sprintf("firestore://ssfkit-test/%s?emulator=%s", collection, testservers.Firestore.Addr(t))
}

// Firestore returns a fresh collection on the Firestore emulator.
func Firestore(t suite.T, ssf string) *store.Table {
	return Open(t, FirestoreURL(t, Name(ssf)))
}
