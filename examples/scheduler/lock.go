package scheduler

import "context"

// Lock is a held distributed lock: the same recipe as the election (recipe.go), in the lock's
// own directory (e.g. /locks/maintenance), released when the work is done.
//
// Mutual exclusion holds among holders that stop when Lost closes, and only as long as they
// notice in time. A holder that loses its session mid-work (partitioned, paused longer than
// the session timeout) may go on writing after the next holder started: the lock alone cannot
// stop it, since it no longer talks to ZooKeeper. So whatever the lock guards must check the
// holder's Token, as the jobs SSF's publish does: the resource remembers the newest token it
// accepted and refuses older ones, in the same conditional write as the change.
type Lock struct{ *hold }

// Acquire waits for the lock whose directory is dir, as holder id, until ctx ends.
func Acquire(ctx context.Context, s *Session, dir, id string) (*Lock, error) {
	prefix, err := newPrefix(id) // each acquisition is a contender of its own
	if err != nil {
		return nil, err
	}
	h, err := contend(ctx, s, dir, prefix, []byte(id))
	if err != nil {
		return nil, err
	}
	return &Lock{h}, nil
}

// Unlock releases the lock: the next waiter gets it at once.
func (l *Lock) Unlock() error { return l.release() }
