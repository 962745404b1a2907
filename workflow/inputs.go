package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// InputError is a thread input that does not match the definition: a
// usage error, found before the thread starts.
type InputError struct {
	Workflow, Input, Why string
	// Advice replaces the general hint when the value's form is the trouble.
	Advice string
}

func (e *InputError) Error() string {
	return fmt.Sprintf("workflow %s: input %q %s", e.Workflow, e.Input, e.Why)
}
func (e *InputError) ExitCode() int { return 2 }
func (e *InputError) Hint() string {
	if e.Advice != "" {
		return e.Advice
	}
	return "pass inputs with --input NAME=VALUE or --input-file FILE.json"
}

// CheckInputs fills defaults and checks required inputs and their types.
// Inputs the definition does not declare are refused, since a typo would
// otherwise pass silently.
func (d *Definition) CheckInputs(in map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(d.Inputs))
	for k, v := range in {
		if _, ok := d.Inputs[k]; !ok {
			return nil, &InputError{Workflow: d.Name, Input: k, Why: fmt.Sprintf("is not declared (inputs: %s)", strings.Join(slices.Sorted(maps.Keys(d.Inputs)), ", "))}
		}
		out[k] = v
	}
	for _, name := range slices.Sorted(maps.Keys(d.Inputs)) {
		spec := d.Inputs[name]
		v, ok := out[name]
		if !ok {
			if spec.Default != nil {
				out[name] = spec.Default
				continue
			}
			if spec.Required {
				return nil, &InputError{Workflow: d.Name, Input: name, Why: "is required"}
			}
			continue
		}
		cv, err := coerceInput(spec.Type, v)
		if err != nil {
			ie := &InputError{Workflow: d.Name, Input: name, Why: err.Error()}
			if nj := (*notJSONError)(nil); errors.As(err, &nj) {
				ie.Advice = fmt.Sprintf(`write it as JSON, e.g. --input %s='%s', or give the inputs in --input-file FILE.yaml`, name, jsonExample(spec.Type))
			}
			return nil, ie
		}
		out[name] = cv
	}
	return out, nil
}

// coerce checks v against typ. Strings from --input k=v are converted to
// the declared scalar type, as a shell user would expect.
func coerce(typ string, v any) (any, error) {
	s, isString := v.(string)
	switch typ {
	case "any", "":
		return v, nil
	case "string":
		if isString {
			return v, nil
		}
	case "number":
		switch n := v.(type) {
		case float64, int, int64:
			return n, nil
		}
		if isString {
			if f, err := strconv.ParseFloat(s, 64); err == nil {
				return f, nil
			}
		}
	case "integer":
		switch n := v.(type) {
		case int, int64:
			return n, nil
		case float64:
			if n == math.Trunc(n) {
				return int64(n), nil
			}
		}
		if isString {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i, nil
			}
		}
	case "boolean":
		if b, ok := v.(bool); ok {
			return b, nil
		}
		if isString {
			if b, err := strconv.ParseBool(s); err == nil {
				return b, nil
			}
		}
	case "object":
		if _, ok := v.(map[string]any); ok {
			return v, nil
		}
	case "array":
		if _, ok := v.([]any); ok {
			return v, nil
		}
	}
	return nil, fmt.Errorf("must be of type %s, got %s", typ, short(v))
}

// notJSONError is an object or array input given as a string that is not
// JSON: the command line has no other way to write one.
type notJSONError struct{ msg string }

func (e *notJSONError) Error() string { return e.msg }

// coerceInput is coerce for a thread's input, where an object or array
// may come as JSON text: the command line has no other way to write one
// (--input changes='["a","b"]').
func coerceInput(typ string, v any) (any, error) {
	s, ok := v.(string)
	if !ok || (typ != "object" && typ != "array") {
		return coerce(typ, v)
	}
	var parsed any
	if err := json.Unmarshal([]byte(s), &parsed); err != nil {
		return nil, &notJSONError{fmt.Sprintf("must be of type %s, and %s is not JSON", typ, short(s))}
	}
	return coerce(typ, parsed)
}

func jsonExample(typ string) string {
	if typ == "object" {
		return `{"key": "value"}`
	}
	return `["a", "b"]`
}
