package yamlfile

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as "20m" or "1h30m" in YAML.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML accepts Go duration strings ("90s", "20m").
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	// A *yaml.TypeError keeps the line; a plain error would lose it.
	bad := func(format string, a ...any) error {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: ", n.Line) + fmt.Sprintf(format, a...)}}
	}
	if n.Kind != yaml.ScalarNode {
		return bad("want a duration such as 90s or 20m")
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return bad("%q is not a duration (want e.g. 90s, 20m, 1h)", n.Value)
	}
	if v < 0 {
		return bad("%q: a duration cannot be negative", n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
}
