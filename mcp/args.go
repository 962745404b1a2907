package mcp

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK refuses arguments that do not match a tool's input schema before
// the tool runs, with the validator's trace as the error
// (validating "arguments": validating root: validating /properties/last:
// type: three has type "string", want "integer"). clarifyArguments makes
// that one sentence an agent can act on.
const argumentsPrefix = `validating "arguments": `

var (
	propertyRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`validating /properties/([A-Za-z0-9_]+): (.*)$`) })
	typeRE     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^type: .* has type "([a-z]+)", want "([a-z]+)"`) })
	boundRE    = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(minimum|maximum): .* (?:less|greater) than (\S+)$`)
	})
	lengthRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(minLength|maxLength): .* (?:fewer|more) than (\d+)$`)
	})
	enumRE     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^enum: (.*) does not equal any of: \[(.*)\]$`) })
	extraRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`unexpected additional properties \[(.*)\]`) })
	requiredRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`required: missing properties: \[(.*)\]`) })
)

// clarifyMiddleware rewrites a tools/call refused for its arguments.
func clarifyMiddleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/call" || err != nil {
			return res, err
		}
		r, ok := res.(*sdk.CallToolResult)
		if !ok || !r.IsError || len(r.Content) != 1 {
			return res, err
		}
		if tc, ok := r.Content[0].(*sdk.TextContent); ok && strings.HasPrefix(tc.Text, argumentsPrefix) {
			tc.Text = clarifyArguments(tc.Text)
		}
		return res, err
	}
}

// clarifyArguments turns the validator's trace into one sentence.
func clarifyArguments(msg string) string {
	msg = strings.TrimPrefix(msg, argumentsPrefix)
	if m := extraRE().FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("Unknown argument %s: see the tool's input schema for the arguments it takes.", m[1])
	}
	if m := requiredRE().FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("Missing argument %s.", m[1])
	}
	m := propertyRE().FindStringSubmatch(msg)
	if m == nil {
		return "The arguments do not match the tool's input schema: " + msg[strings.LastIndex(msg, ": ")+2:] + "."
	}
	name, why := m[1], m[2]
	switch {
	case typeRE().MatchString(why):
		t := typeRE().FindStringSubmatch(why)
		return fmt.Sprintf("Argument %q must be %s, not %s.", name, article(t[2]), article(t[1]))
	case boundRE().MatchString(why):
		b := boundRE().FindStringSubmatch(why)
		word := map[string]string{"minimum": "at least", "maximum": "at most"}[b[1]]
		return fmt.Sprintf("Argument %q must be %s %s.", name, word, number(b[2]))
	case lengthRE().MatchString(why):
		l := lengthRE().FindStringSubmatch(why)
		if l[1] == "minLength" && l[2] == "1" {
			return fmt.Sprintf("Argument %q must not be empty.", name)
		}
		word := map[string]string{"minLength": "at least", "maxLength": "at most"}[l[1]]
		return fmt.Sprintf("Argument %q must be %s %s characters long.", name, word, l[2])
	case enumRE().MatchString(why):
		e := enumRE().FindStringSubmatch(why)
		return fmt.Sprintf("Argument %q must be one of %s, not %s.", name, strings.Join(strings.Fields(e[2]), ", "), e[1])
	}
	return fmt.Sprintf("Argument %q does not match the tool's input schema: %s.", name, why)
}

func article(jsonType string) string {
	switch jsonType {
	case "integer", "object", "array":
		return "an " + jsonType
	case "null":
		return "null"
	}
	return "a " + jsonType
}

// number prints the validator's %f bound as the number it is (0, not 0.000000).
func number(s string) string {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
