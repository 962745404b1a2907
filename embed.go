package nerve

import _ "embed"

// ExampleConfig is nerve.yaml.example: what `nerve init` writes and what a
// test proves still loads.
//
//go:embed nerve.yaml.example
var ExampleConfig []byte
