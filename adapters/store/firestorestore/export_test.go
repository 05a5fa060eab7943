package firestorestore

import "google.golang.org/grpc"

// Exported for the external tests.
var (
	EncodeID = encodeID
	DecodeID = decodeID
)

// SetTestInterceptor makes clients created from now on run i on every call to an emulator
// named by emulator=; nil removes it.
func SetTestInterceptor(i grpc.UnaryClientInterceptor) { testInterceptor = i }
