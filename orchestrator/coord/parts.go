package coord

import (
	"bytes"
	"context"
	"fmt"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// A value too large for one row (a log entry without a bucket, a snapshot) is split into parts:
// rows NAME/000000, NAME/000001, ... of a partition, written before the row that names them.

func partKey(partition, name string, i int64) store.Key {
	return store.Key{Partition: partition, Sort: fmt.Sprintf("%s/%06d", name, i)}
}

// putParts writes enc as parts of the table's row room under name (at least one) and returns
// how many.
func (s *Service) putParts(ctx context.Context, partition, name string, enc []byte) (int64, error) {
	room := s.rowRoom()
	var n int64
	for i := 0; i == 0 || i*room < len(enc); i++ {
		if err := s.tbl.Put(ctx, partKey(partition, name, n), store.Attrs{"b": enc[i*room : min(len(enc), (i+1)*room)]}); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// getParts joins the n parts under name; a missing one is an error.
func (s *Service) getParts(ctx context.Context, partition, name string, n int64) ([]byte, error) {
	var buf bytes.Buffer
	for i := int64(0); i < n; i++ {
		a, ok, err := s.tbl.Get(ctx, partKey(partition, name, i))
		if err != nil {
			return nil, err
		}
		b, _ := a["b"].([]byte)
		if !ok || b == nil {
			return nil, fmt.Errorf("part %d of %d is missing", i, n)
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// deleteParts deletes the n parts under name.
func (s *Service) deleteParts(ctx context.Context, partition, name string, n int64) error {
	for i := int64(0); i < n; i++ {
		if _, err := s.tbl.Delete(ctx, partKey(partition, name, i), store.Always()); err != nil {
			return err
		}
	}
	return nil
}
