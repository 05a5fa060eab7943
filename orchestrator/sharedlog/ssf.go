package sharedlog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Token is an AppendOnce token for the append that parts name (an SSF instance's step, a
// workflow's activity), however long they are: kind, then a digest of the parts.
func Token(kind string, parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return kind + "-" + hex.EncodeToString(sum[:20])
}

// AppendStep appends records to color from an SSF, exactly once: the append is a step of the
// instance, so a re-execution (after a crash, a timeout, the intent collector's relaunch) gets
// the SN the first execution got instead of appending again. The step's token makes the append
// itself idempotent (AppendOnce) and the instance's read log replays its result. Not inside a
// transaction.
func (l *Log) AppendStep(env *ssf.Env, color string, records ...[]byte) (uint64, error) {
	step, err := env.Progress()
	if err != nil {
		return 0, err
	}
	token := Token("ssf", env.SSF(), env.InstanceID(), strconv.Itoa(step))
	out, err := env.External(func(ctx context.Context) (json.RawMessage, error) {
		sn, err := l.AppendOnce(ctx, token, color, records...)
		if err != nil {
			return nil, err
		}
		return json.Marshal(sn)
	})
	if err != nil {
		return 0, err
	}
	var sn uint64
	if err := json.Unmarshal(out, &sn); err != nil {
		return 0, fmt.Errorf("sharedlog: the logged result of step %d is %s, not an SN: %w", step, out, err)
	}
	return sn, nil
}

// ArriveStep is Arrive from an SSF, as a step of the instance: a re-execution does not arrive
// again (AppendStep).
func (l *Log) ArriveStep(env *ssf.Env, barrier, participant string, note []byte) error {
	rec, err := l.arrivalAt(env.Context(), barrier, participant, note)
	if err != nil {
		return err
	}
	_, err = l.AppendStep(env, barrier, rec)
	return err
}
