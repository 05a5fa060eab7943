package ssf

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// Typed turns fn, an SSF written with a Go input and output type, into a Handler:
//
//	func withdraw(env *ssf.Env, req Withdrawal) (bool, error) { ... }
//	host.Add(ssf.Config{Name: "accounts", Handler: ssf.Typed(withdraw), ...})
//
// It is the JSON form with the decoding and encoding written once, and behaves exactly as that
// handler would:
//
//   - The input is decoded into a new In with encoding/json (json.Unmarshal into *In: unknown
//     fields are ignored). A JSON null, which is what a request without input carries, leaves
//     In its zero value: nil if In is a pointer, the zero struct if it is a value. An In of
//     type json.RawMessage receives the input undecoded.
//   - An input that does not decode into In is refused before fn runs, with a *DecodeError
//     (naming the SSF and the Go type; it wraps ErrBadInput and the decoder's error) as the
//     handler's application error: recorded once as the instance's result and returned to the
//     caller (as *AppError across a call), exactly as an explicit json.Unmarshal failure
//     returned from a JSON handler would be. Every execution decodes the same input the same
//     way, so it never re-runs.
//   - fn's output is the handler's output, encoded by the runtime as it encodes any handler's
//     (json.Marshal): a nil pointer, slice or map becomes null, a json.RawMessage is stored as
//     it is, a nil interface records no output. When fn returns an error its output is
//     ignored, and the error is returned unchanged, so transaction aborts, poisoned executions
//     (whose errors the runtime ignores in favour of the infrastructure failure) and panics
//     are handled exactly as for a JSON handler.
//
// The adapter adds no step and nothing nondeterministic: decoding depends on the input alone.
func Typed[In, Out any](fn func(env *Env, in In) (Out, error)) Handler {
	return func(env *Env, input json.RawMessage) (any, error) {
		var in In
		if raw, ok := any(&in).(*json.RawMessage); ok {
			*raw = input
		} else if len(input) > 0 {
			if err := json.Unmarshal(input, &in); err != nil {
				return nil, &DecodeError{SSF: env.SSF(), What: "input", Type: typeName[In](), Err: err}
			}
		}
		out, err := fn(env, in)
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

// Call is SyncInvoke with a typed output: it calls the SSF callee with input (JSON-encoded as
// SyncInvoke encodes it; a json.RawMessage is sent as it is) and decodes the callee's output
// into an Out with encoding/json. The call is the same single logged step, so replay is that
// of SyncInvoke.
//
//   - An error from SyncInvoke is returned unchanged, with the zero Out: the callee's
//     *AppError, an error wrapping ErrTxAborted (the transaction must abort), an
//     infrastructure failure that poisoned the execution.
//   - A callee that recorded no output, or null, gives the zero Out and no error. An Out of type
//     json.RawMessage receives the output undecoded (what SyncInvoke returns).
//   - An output that does not decode into Out gives a *DecodeError naming the callee and the Go
//     type (it wraps ErrBadInput and the decoder's error). It does not poison the execution:
//     the output is logged, so every execution decodes it the same way, and the handler may
//     return the error as its application error or handle it.
//
// AsyncInvoke has no typed form: it takes any input already, and has no output.
func Call[Out any](env *Env, callee string, input any) (Out, error) {
	var out Out
	raw, err := env.SyncInvoke(callee, input)
	if err != nil {
		return out, err
	}
	if r, ok := any(&out).(*json.RawMessage); ok {
		*r = raw
		return out, nil
	}
	if len(raw) == 0 {
		return out, nil
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		var zero Out
		return zero, &DecodeError{SSF: callee, What: "output", Type: typeName[Out](), Err: err}
	}
	return out, nil
}

// DecodeError reports a JSON value that does not decode into the Go type a typed handler
// (Typed) or a typed call (Call) expects. It wraps ErrBadInput and the decoder's error (such
// as a *json.UnmarshalTypeError or *json.SyntaxError).
type DecodeError struct {
	SSF  string // the SSF whose input or output the value is
	What string // "input" or "output"
	Type string // the Go type, as reflect names it ("bank.Transfer", "*bank.Transfer", "int")
	Err  error  // encoding/json's error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("ssf %s: %s does not decode into %s: %v", e.SSF, e.What, e.Type, e.Err)
}

// Unwrap returns ErrBadInput and the decoder's error.
func (e *DecodeError) Unwrap() []error { return []error{ErrBadInput, e.Err} }

func typeName[T any]() string { return reflect.TypeFor[T]().String() }
