package scheduler

import "context"

// Leadership is a worker's term as leader of an election: from Campaign's return until Lost is
// closed.
//
// Failure modes, and what the leader must do:
//
//   - Its session expires (a partition, a long pause, an overloaded server): ZooKeeper deletes
//     its candidate znode, and the next candidate becomes leader, possibly before the old one
//     hears of it. The old leader stops when Lost closes, but anything it sends between the
//     expiry and noticing it (a request in flight, a pause between its last check and its call)
//     is a stale leader's action: the token it carries is older than the new leader's, and the
//     jobs SSF refuses it (fencing). Without the token the two leaders' actions would
//     interleave.
//   - Its connection drops but the session survives: Lost closes anyway (the client cannot
//     tell); the worker campaigns again after reconnecting, finds its znode still first, and
//     is leader again with the same token.
//   - It crashes: its session expires after the timeout, and the next candidate takes over.
//   - It resigns or closes its session: its znode is deleted at once; the next candidate takes
//     over without waiting for a timeout.
type Leadership struct{ *hold }

// Campaign joins the election in directory dir (e.g. /election) as candidate id and returns
// when id is leader, or ctx ends. See the recipe (recipe.go). A candidate that campaigns
// again on the same Session (its term ended with a lost connection, not a resignation) keeps
// its znode if the session survived: its place in the queue, and its token.
func Campaign(ctx context.Context, s *Session, dir, id string) (*Leadership, error) {
	prefix, err := s.candidacy(dir, id)
	if err != nil {
		return nil, err
	}
	h, err := contend(ctx, s, dir, prefix, []byte(id))
	if err != nil {
		return nil, err
	}
	return &Leadership{h}, nil
}

// Resign ends the term and deletes the candidate znode: the next candidate is leader at once.
// A candidate that campaigns again after resigning joins at the back of the queue.
func (l *Leadership) Resign() error { return l.release() }

// Leader returns the id of the current leader of the election in dir, or "" if there is none.
func Leader(s *Session, dir string) (string, error) { return holder(s, dir) }
