package sharedlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Barriers give causal order across colors (FlexLog §4.3's "final record" pattern): colors are
// not ordered among themselves, so a stage's participants each append to their own colors and
// then arrive at a barrier color; whoever awaits the barrier can then read everything the
// participants appended before arriving. The barrier is a color like any other (created on first
// use), holding one arrival record per arrival.

// arrival is a barrier color's record.
type arrival struct {
	Participant string `json:"p"`
	Note        []byte `json:"n,omitempty"`
}

// arrivalAt creates the barrier color if need be and returns participant's arrival record.
func (l *Log) arrivalAt(ctx context.Context, barrier, participant string, note []byte) ([]byte, error) {
	if participant == "" {
		return nil, fmt.Errorf("%w: a barrier's participant needs a name", ErrInvalid)
	}
	if err := l.AddColor(ctx, barrier, ""); err != nil {
		return nil, err
	}
	return json.Marshal(arrival{Participant: participant, Note: note})
}

// Arrive records at barrier that participant is done, with an optional note for the awaiters.
// Arriving again is harmless: awaiters keep the first arrival's note. From an SSF, ArriveStep
// arrives exactly once.
func (l *Log) Arrive(ctx context.Context, barrier, participant string, note []byte) error {
	rec, err := l.arrivalAt(ctx, barrier, participant, note)
	if err != nil {
		return err
	}
	_, err = l.Append(ctx, barrier, rec)
	return err
}

// errArrived stops Await's subscription.
var errArrived = errors.New("every participant arrived")

// Await waits until every one of participants has arrived at barrier, or ctx ends, and returns
// their notes by participant. Once it returns, every record a participant appended before it
// arrived is readable. It may be called before anyone arrives.
func (l *Log) Await(ctx context.Context, barrier string, participants ...string) (map[string][]byte, error) {
	if len(participants) == 0 {
		return nil, fmt.Errorf("%w: Await(%s) names no participant", ErrInvalid, barrier)
	}
	if err := l.AddColor(ctx, barrier, ""); err != nil {
		return nil, err
	}
	missing := map[string]bool{}
	for _, p := range participants {
		missing[p] = true
	}
	want := len(missing)
	notes := map[string][]byte{}
	err := l.Subscribe(ctx, barrier, 1, func(r Record) error {
		var a arrival
		if err := json.Unmarshal(r.Data, &a); err != nil {
			return fmt.Errorf("sharedlog: record %d of barrier %s is not an arrival: %w", r.SN, barrier, err)
		}
		if missing[a.Participant] {
			delete(missing, a.Participant)
			notes[a.Participant] = a.Note
		}
		if len(missing) == 0 {
			return errArrived
		}
		return nil
	})
	if !errors.Is(err, errArrived) {
		return nil, fmt.Errorf("sharedlog: awaiting barrier %s (%d of %d participants arrived): %w", barrier, want-len(missing), want, err)
	}
	return notes, nil
}
