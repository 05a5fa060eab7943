package zkcompat

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// Run runs the scenario named name against server (HOST:PORT) under root and returns the
// normalised transcript, or an error if the harness could not run it.
func Run(server, name, root string) ([]string, error) {
	for _, sc := range scenarios {
		if sc.name != name {
			continue
		}
		r := &run{tr: &transcript{}, server: server, root: root}
		err := r.do(sc.run)
		for _, c := range r.clients {
			c.close()
		}
		if len(r.tr.fails) > 0 {
			err = errors.Join(err, fmt.Errorf("%v", r.tr.fails))
		}
		return r.tr.normalized(), err
	}
	return nil, fmt.Errorf("no scenario %q", name)
}

// Scenarios lists the scenarios' names.
func Scenarios() []string {
	var out []string
	for _, sc := range scenarios {
		out = append(out, sc.name)
	}
	return out
}

func (r *run) do(f func(*run)) (err error) {
	c, _, cerr := zk.Connect([]string{r.server}, 10*time.Second, zk.WithLogger(quiet{}))
	if cerr != nil {
		return cerr
	}
	defer c.Close()
	// The root is created outside the transcript, by a session of its own.
	if _, err := c.Create(r.root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		return fmt.Errorf("creating %s: %w", r.root, err)
	}
	defer func() {
		if p := recover(); p != nil {
			if p != errAbort {
				panic(p)
			}
			err = errAbort
		}
	}()
	f(r)
	return nil
}
