package telemetry

import (
	"encoding/binary"
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The OTLP protobuf encoding of an ExportTraceServiceRequest, written by
// hand (opentelemetry-proto's trace.proto, common.proto, resource.proto):
// the generated types bring the protobuf runtime and gRPC, whose package
// initialisation every nerve process would pay, traces on or off. The
// tests decode what this writes with those generated types.

// pb appends protobuf fields to a buffer.
type pb []byte

func (b pb) tag(field, wire int) pb { return binary.AppendUvarint(b, uint64(field)<<3|uint64(wire)) }

func (b pb) varint(field int, v uint64) pb {
	if v == 0 {
		return b
	}
	return binary.AppendUvarint(b.tag(field, 0), v)
}

func (b pb) fixed64(field int, v uint64) pb {
	if v == 0 {
		return b
	}
	return binary.LittleEndian.AppendUint64(b.tag(field, 1), v)
}

func (b pb) fixed32(field int, v uint32) pb {
	if v == 0 {
		return b
	}
	return binary.LittleEndian.AppendUint32(b.tag(field, 5), v)
}

func (b pb) bytes(field int, v []byte) pb {
	if len(v) == 0 {
		return b
	}
	return append(binary.AppendUvarint(b.tag(field, 2), uint64(len(v))), v...)
}

func (b pb) str(field int, v string) pb {
	if v == "" {
		return b
	}
	return append(binary.AppendUvarint(b.tag(field, 2), uint64(len(v))), v...)
}

// msg appends an embedded message that fill writes (even when empty: a
// repeated message's presence counts).
func (b pb) msg(field int, fill func(pb) pb) pb {
	body := fill(nil)
	return append(binary.AppendUvarint(b.tag(field, 2), uint64(len(body))), body...)
}

// encodeTraces is ExportTraceServiceRequest{resource_spans} of spans,
// grouped by resource and scope as the SDK gives them.
func encodeTraces(spans []sdktrace.ReadOnlySpan) []byte {
	type scoped struct {
		scope instrumentation.Scope
		spans []sdktrace.ReadOnlySpan
	}
	type group struct {
		res    *resource.Resource
		scopes []*scoped
	}
	var groups []*group
	for _, s := range spans {
		var g *group
		for _, x := range groups {
			if x.res == s.Resource() {
				g = x
			}
		}
		if g == nil {
			g = &group{res: s.Resource()}
			groups = append(groups, g)
		}
		var sc *scoped
		for _, x := range g.scopes {
			if x.scope.Name == s.InstrumentationScope().Name && x.scope.Version == s.InstrumentationScope().Version {
				sc = x
			}
		}
		if sc == nil {
			sc = &scoped{scope: s.InstrumentationScope()}
			g.scopes = append(g.scopes, sc)
		}
		sc.spans = append(sc.spans, s)
	}
	var out pb
	for _, g := range groups {
		out = out.msg(1, func(b pb) pb { // ResourceSpans
			b = b.msg(1, func(b pb) pb { return attrs(b, 1, g.res.Attributes()) }) // Resource
			for _, sc := range g.scopes {
				b = b.msg(2, func(b pb) pb { // ScopeSpans
					b = b.msg(1, func(b pb) pb { return b.str(1, sc.scope.Name).str(2, sc.scope.Version) })
					for _, s := range sc.spans {
						b = b.msg(2, func(b pb) pb { return span(b, s) })
					}
					return b.str(3, sc.scope.SchemaURL)
				})
			}
			return b.str(3, g.res.SchemaURL())
		})
	}
	return out
}

// span writes a Span's fields.
func span(b pb, s sdktrace.ReadOnlySpan) pb {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = b.bytes(1, tid[:]).bytes(2, sid[:]).str(3, sc.TraceState().String())
	if p := s.Parent(); p.IsValid() {
		psid := p.SpanID()
		b = b.bytes(4, psid[:])
	}
	b = b.str(5, s.Name()).varint(6, uint64(s.SpanKind()))
	b = b.fixed64(7, uint64(s.StartTime().UnixNano())).fixed64(8, uint64(s.EndTime().UnixNano()))
	b = attrs(b, 9, s.Attributes()).varint(10, uint64(s.DroppedAttributes()))
	for _, e := range s.Events() {
		b = b.msg(11, func(b pb) pb {
			return attrs(b.fixed64(1, uint64(e.Time.UnixNano())).str(2, e.Name), 3, e.Attributes).varint(4, uint64(e.DroppedAttributeCount))
		})
	}
	b = b.varint(12, uint64(s.DroppedEvents()))
	for _, l := range s.Links() {
		b = b.msg(13, func(b pb) pb {
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = b.bytes(1, ltid[:]).bytes(2, lsid[:]).str(3, l.SpanContext.TraceState().String())
			return attrs(b, 4, l.Attributes).varint(5, uint64(l.DroppedAttributeCount)).fixed32(6, uint32(l.SpanContext.TraceFlags()))
		})
	}
	b = b.varint(14, uint64(s.DroppedLinks()))
	if st := s.Status(); st.Code != codes.Unset {
		code := uint64(1) // STATUS_CODE_OK
		if st.Code == codes.Error {
			code = 2
		}
		b = b.msg(15, func(b pb) pb { return b.str(2, st.Description).varint(3, code) })
	}
	flags := uint32(sc.TraceFlags()) | 0x100 // SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
	if s.Parent().IsRemote() {
		flags |= 0x200
	}
	return b.fixed32(16, flags)
}

// attrs writes each attribute as a KeyValue in field.
func attrs(b pb, field int, kvs []attribute.KeyValue) pb {
	for _, kv := range kvs {
		b = b.msg(field, func(b pb) pb {
			return b.str(1, string(kv.Key)).msg(2, func(b pb) pb { return anyValue(b, kv.Value) })
		})
	}
	return b
}

// anyValue writes an AnyValue's fields. Its oneof is set even when zero:
// a 0 or "" attribute is present, not empty.
func anyValue(b pb, v attribute.Value) pb {
	switch v.Type() {
	case attribute.BOOL:
		var x uint64
		if v.AsBool() {
			x = 1
		}
		return binary.AppendUvarint(b.tag(2, 0), x)
	case attribute.INT64:
		return binary.AppendUvarint(b.tag(3, 0), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return binary.LittleEndian.AppendUint64(b.tag(4, 1), math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		s := v.AsString()
		return append(binary.AppendUvarint(b.tag(1, 2), uint64(len(s))), s...)
	case attribute.BYTESLICE:
		s := v.AsByteSlice()
		return append(binary.AppendUvarint(b.tag(7, 2), uint64(len(s))), s...)
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE, attribute.SLICE:
		return b.msg(5, func(b pb) pb { // ArrayValue
			for _, x := range sliceValues(v) {
				b = b.msg(1, func(b pb) pb { return anyValue(b, x) })
			}
			return b
		})
	case attribute.MAP:
		return b.msg(6, func(b pb) pb { return attrs(b, 1, v.AsMap()) }) // KeyValueList
	}
	return b // EMPTY: an AnyValue with nothing set
}

func sliceValues(v attribute.Value) []attribute.Value {
	var out []attribute.Value
	switch v.Type() {
	case attribute.BOOLSLICE:
		for _, x := range v.AsBoolSlice() {
			out = append(out, attribute.BoolValue(x))
		}
	case attribute.INT64SLICE:
		for _, x := range v.AsInt64Slice() {
			out = append(out, attribute.Int64Value(x))
		}
	case attribute.FLOAT64SLICE:
		for _, x := range v.AsFloat64Slice() {
			out = append(out, attribute.Float64Value(x))
		}
	case attribute.STRINGSLICE:
		for _, x := range v.AsStringSlice() {
			out = append(out, attribute.StringValue(x))
		}
	case attribute.SLICE:
		out = v.AsSlice()
	}
	return out
}
