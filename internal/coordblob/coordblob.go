// Package coordblob opens the object store the coordination service (orchestrator/coord) keeps
// large log entries in, by URL, through gocloud.dev/blob: s3:// (AWS S3, or moto with
// ?endpoint=...&use_path_style=true), azblob:// (Azure Blob Storage, or Azurite), gs:// (Google
// Cloud Storage), file:/// and mem://. A *Bucket satisfies coord.Blobs; it uses only the standard
// library's types, so coord need not import gocloud.
//
// Imports: nothing of the module; internal/coordserve and coord's tests import it.
package coordblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob://
	_ "gocloud.dev/blob/fileblob"  // file:///
	_ "gocloud.dev/blob/gcsblob"   // gs://
	_ "gocloud.dev/blob/memblob"   // mem://
	_ "gocloud.dev/blob/s3blob"    // s3://
	"gocloud.dev/gcerrors"
)

// Bucket is an open bucket.
type Bucket struct {
	b   *blob.Bucket
	url string
}

// Open opens the bucket at rawURL and checks that it answers (exists, credentials accepted), so
// a server fails at start rather than at its first large write.
func Open(ctx context.Context, rawURL string) (*Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("blob URL %q: want s3://BUCKET, azblob://CONTAINER, gs://BUCKET, file:///DIR or mem://", rawURL)
	}
	b, err := blob.OpenBucket(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("blob URL %s: %w%s", Redacted(rawURL), err, hint(u.Scheme))
	}
	ok, err := b.IsAccessible(ctx)
	if err == nil && !ok {
		err = errors.New("no such bucket (create it first)")
	}
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("bucket %s does not answer: %w%s", Redacted(rawURL), err, hint(u.Scheme))
	}
	return &Bucket{b: b, url: rawURL}, nil
}

// hint says where a scheme's driver looks for credentials.
func hint(scheme string) string {
	switch scheme {
	case "s3":
		return " (credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or an instance role; ?region=R, and ?endpoint=URL&use_path_style=true for an S3-compatible server)"
	case "azblob":
		return " (credentials: AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN, AZURE_STORAGE_CONNECTION_STRING, or Azure's default identity; ?domain=HOST&protocol=http&localemu=true for Azurite)"
	case "gs":
		return " (credentials: GOOGLE_APPLICATION_CREDENTIALS or `gcloud auth application-default login`)"
	}
	return ""
}

// Redacted is a bucket URL without a password or SAS-like query values, for messages.
func Redacted(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	q := u.Query()
	for k := range q {
		switch k {
		case "sig", "sv", "se", "sp", "sr", "st", "sas", "key":
			q.Set(k, "xxxxx")
		}
	}
	u.RawQuery = q.Encode()
	return u.Redacted()
}

// Bucket is the gocloud bucket underneath (for tests and escape hatches: As).
func (b *Bucket) Bucket() *blob.Bucket { return b.b }

// String is the bucket's URL, redacted.
func (b *Bucket) String() string { return Redacted(b.url) }

// Put writes an object whole.
func (b *Bucket) Put(ctx context.Context, key string, data []byte) error {
	return b.b.WriteAll(ctx, key, data, &blob.WriterOptions{ContentType: "application/octet-stream"})
}

// Get reads an object; an error wrapping fs.ErrNotExist when there is none.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	data, err := b.b.ReadAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("%s: %w", key, fs.ErrNotExist)
	}
	return data, err
}

// Delete removes an object; deleting one that is not there is no error.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	err := b.b.Delete(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil
	}
	return err
}

// List calls fn with the key of every object under prefix.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(key string) error) error {
	it := b.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if o.IsDir {
			continue
		}
		if err := fn(o.Key); err != nil {
			return err
		}
	}
}

// Close releases the bucket's resources.
func (b *Bucket) Close() error { return b.b.Close() }
