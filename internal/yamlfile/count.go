package yamlfile

import (
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Count is a whole number of things (tokens) that YAML must write as an
// integer: yaml.v3 would truncate 1.5 into an int silently.
type Count int64

// UnmarshalYAML accepts an integer scalar only.
func (c *Count) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.ShortTag() == "!!int") {
		v, err := strconv.ParseInt(n.Value, 0, 64)
		if err == nil {
			*c = Count(v)
			return nil
		}
	}
	// A *yaml.TypeError keeps the line; a plain error would lose it.
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a whole number", n.Line, n.Value)}}
}
